//go:build !linux

package uring

import "errors"

// ErrUnsupported is returned by New when the kernel has no usable io_uring.
var ErrUnsupported = errors.New("io_uring is not available")

// Ring is not available outside Linux.
type Ring struct{}

func New(uint32) (*Ring, error)                { return nil, ErrUnsupported }
func (*Ring) Close()                           {}
func (*Ring) Space() int                       { return 0 }
func (*Ring) Send(int, []byte, uint64) bool    { return false }
func (*Ring) Recv(int, []byte, uint64) bool    { return false }
func (*Ring) Submit(func(uint64, int32)) error { return nil }
