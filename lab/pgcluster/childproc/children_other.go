//go:build !linux

package childproc

import (
	"errors"
	"fmt"
)

// Children lists a process's children; it reads /proc, so Linux only
// (elsewhere an error that is errors.ErrUnsupported).
func Children(int) (map[int]string, error) {
	return nil, fmt.Errorf("childproc: listing child processes needs Linux's /proc: %w", errors.ErrUnsupported)
}
