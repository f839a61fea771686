package sim

import (
	"fmt"
	"testing"
)

func TestZZProbe(t *testing.T) {
	r := NewRand(42, "arrivals")
	for i := 0; i < 4; i++ {
		fmt.Printf("%#x,\n", r.Uint64())
	}
	r = NewRand(42, "arrivals")
	for i := 0; i < 3; i++ {
		fmt.Println(r.Float64(), r.ExpFloat64(), r.NormFloat64(), r.IntN(10))
	}
	r = NewRand(1, "service")
	d := ExpDist(10 * Millisecond)
	for i := 0; i < 3; i++ {
		fmt.Println(d.Sample(r))
	}
	r = NewRand(0, "")
	for i := 0; i < 2; i++ {
		fmt.Printf("%#x,\n", r.Uint64())
	}
	l, err := LognormalP99(10*Millisecond, 50*Millisecond)
	fmt.Println(l, err)
}
