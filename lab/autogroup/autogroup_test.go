package autogroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fake points the package at a file of its own holding v.
func fake(t *testing.T, v string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sched_autogroup_enabled")
	if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := sysctl
	sysctl = p
	t.Cleanup(func() { sysctl = old })
	return p
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOffRestore(t *testing.T) {
	p := fake(t, "1")
	if on, ok := Enabled(); !on || !ok {
		t.Fatalf("Enabled: %v, %v; want on", on, ok)
	}
	was, err := Off()
	if err != nil || !was {
		t.Fatalf("Off: %v, %v; want it was on", was, err)
	}
	if got := read(t, p); got != "0" {
		t.Fatalf("after Off the setting is %q, want 0", got)
	}
	// A second user in the same process shares the change.
	if was, err := Off(); err != nil || !was {
		t.Fatalf("second Off: %v, %v", was, err)
	}
	if err := Restore(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p); got != "0" {
		t.Fatalf("one user still holds it, but the setting is %q", got)
	}
	if err := Restore(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p); got != "1" {
		t.Fatalf("after the last Restore the setting is %q, want 1 back", got)
	}
	if err := Restore(); err == nil {
		t.Error("a Restore without an Off: want an error")
	}
}

func TestOffWhenAlreadyOff(t *testing.T) {
	p := fake(t, "0")
	was, err := Off()
	if err != nil || was {
		t.Fatalf("Off: %v, %v; want it was off", was, err)
	}
	if err := Restore(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p); got != "0\n" {
		t.Fatalf("the setting was left alone? got %q", got)
	}
}

func TestOffUnavailable(t *testing.T) {
	old := sysctl
	sysctl = filepath.Join(t.TempDir(), "none")
	t.Cleanup(func() { sysctl = old })
	if _, ok := Enabled(); ok {
		t.Error("Enabled: ok with no setting")
	}
	if _, err := Off(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Off with no setting: %v, want ErrUnavailable", err)
	}
}
