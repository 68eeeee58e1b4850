package main

import "testing"

func TestCPUDeltaIgnoresRestartedProcesses(t *testing.T) {
	before := map[int]float64{10: 5, 11: 7, 12: 1}
	// 11 was restarted under the same pid (its counter went back), 12
	// exited, 13 is new: only 10's time counts.
	after := map[int]float64{10: 6.5, 11: 0.2, 13: 3}
	if d := cpuDelta(before, after); d != 1.5 {
		t.Fatalf("delta %v", d)
	}
}

func TestErrorMessage(t *testing.T) {
	e := []byte(`{"time":"x","level":"ERROR","msg":"rpc error: Too many connections"}` + "\n")
	if got := errorMessage(e); got != "rpc error: Too many connections" {
		t.Fatalf("%q", got)
	}
	if got := errorMessage([]byte("plain\n")); got != "plain" {
		t.Fatalf("%q", got)
	}
}
