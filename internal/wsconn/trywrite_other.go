//go:build !unix

package wsconn

// writeNow is not available here: every write is a blocking Flush.
func writeNow(uintptr, []byte) (int, error) { return 0, nil }

const canWriteNow = false
