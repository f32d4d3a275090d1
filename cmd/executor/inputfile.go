package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxInputFile bounds a file the command line names (-config, -jobs):
// both are a few KB; more is a mistake.
const maxInputFile = 4 << 20

// readInputFile reads the file at path for what ("config", "jobs file"),
// at most maxInputFile bytes, and gives up when ctx is done (SIGINT,
// SIGTERM): -config /dev/zero read until the process died out of
// memory, and a FIFO no one wrote to held the command past every signal
// but SIGKILL. The read left behind ends with the process.
func readInputFile(ctx context.Context, what, path string) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readCapped(path)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", what, r.err)
		}
		return r.data, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: read %s: gave up waiting for its content (%w)", what, path, ctx.Err())
	}
}

// readCapped reads at most maxInputFile bytes of the file at path.
func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // "open PATH: no such file or directory"
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInputFile+1))
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // "read PATH: read PATH: is a directory" named the path twice
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxInputFile {
		return nil, fmt.Errorf("%s is over %d MiB: not a settings file", path, maxInputFile>>20)
	}
	return data, nil
}
