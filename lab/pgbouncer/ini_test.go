package pgbouncer

import (
	"strings"
	"testing"
)

// TestDatabaseEntries: Config.Databases are written into [databases]
// before the "*" fallback, one line each.
func TestDatabaseEntries(t *testing.T) {
	cfg := Config{UpstreamPort: 5432, Databases: []string{
		"web = host=127.0.0.1 port=5432 dbname=app pool_mode=transaction pool_size=10",
		"report = host=127.0.0.1 port=5432 dbname=app pool_mode=session pool_size=2",
	}}
	s, err := cfg.settings("/tmp/x", 6432, "1.18.0")
	if err != nil {
		t.Fatal(err)
	}
	ini := iniFile(s, cfg.databaseLine())
	want := "[databases]\n" + cfg.Databases[0] + "\n" + cfg.Databases[1] + "\n* = host=127.0.0.1 port=5432\n\n[pgbouncer]\n"
	if !strings.Contains(ini, want) {
		t.Errorf("pgbouncer.ini:\n%s\nwant it to hold:\n%s", ini, want)
	}
}
