package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CursorStore keeps a Client's committed cursor where the application's
// next process finds it. Load returns "" when there is none yet. Save is
// called with every committed cursor, in order, from one goroutine at a
// time.
type CursorStore interface {
	Load(ctx context.Context) (string, error)
	Save(ctx context.Context, cursor string) error
}

// MemoryStore keeps the cursor in memory: a new process starts without
// one (a named subscriber then starts from the cursor the gateway stored
// for it). The zero value is ready to use.
type MemoryStore struct {
	mu     sync.Mutex
	cursor string
}

func (m *MemoryStore) Load(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor, nil
}

func (m *MemoryStore) Save(_ context.Context, cursor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor = cursor
	return nil
}

// FileStore keeps the cursor in a file, replaced whole on every Save: the
// cursor is written to a temporary file beside it, synced, and renamed
// over it, so that a crash leaves the old cursor or the new one, never a
// torn one. Each Save costs an fsync of the file and its directory
// (milliseconds on most disks): at high transaction rates, prefer
// committing every so many transactions (WithManualCommit).
type FileStore struct {
	path string
}

// NewFileStore returns a store in the file path; its directory must
// exist.
func NewFileStore(path string) *FileStore { return &FileStore{path: path} }

func (f *FileStore) Load(context.Context) (string, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *FileStore) Save(_ context.Context, cursor string) error {
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.WriteString(cursor + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		return fmt.Errorf("save cursor to %s: %w", f.path, err)
	}
	// The rename is durable once the directory is synced.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
