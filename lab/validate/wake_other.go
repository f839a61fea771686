//go:build !linux

package validate

import (
	"context"
	"fmt"
	"time"
)

// wakeSide cannot run off Linux: a helper pins itself to its core.
func wakeSide(spec string) (time.Duration, error) { return 0, errNoPinning }

// pingPong cannot run off Linux: its helpers pin themselves to cores.
func pingPong(ctx context.Context, exe string, b int, work time.Duration) (time.Duration, error) {
	return 0, fmt.Errorf("measure the wake-up: %w", errNoPinning)
}
