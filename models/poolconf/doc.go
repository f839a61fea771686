// Package poolconf is a pooler's settings as PgBouncer names them: the
// [pgbouncer] section of pgbouncer.ini as one Go type (Settings), its
// [databases] entries (Database) and [users] entries (User), PgBouncer
// 1.19's peer_id and [peers] entries (Peer), PgBouncer 1.18's defaults
// (Defaults), and a reader for the ini file itself (Load,
// with %include), so a user's existing pgbouncer.ini can be read as it is.
//
// Pooling, embedded in Settings, is the part that says how the pools
// behave; the simulator's pooler (models/system), the proxy and the
// PgBouncer launcher all embed or take it, so each of them reads the same
// field with the same meaning. Every field with a pgbouncer.ini key has it
// as its `ini` tag: reading the file, Set, Text and the launcher go by the
// tags, so a key is declared once.
//
// # Units and the meaning of 0
//
// Durations are time.Duration (the ini file writes seconds, fractions
// allowed); sizes and counts are ints. A field of Settings always holds the
// value in force, never a "use the default" marker: Defaults() fills
// PgBouncer 1.18's defaults, and 0 means exactly what 0 means for that key
// in pgbouncer.ini - a timeout of 0 is disabled, a connection limit of 0
// (max_db_connections, max_user_connections) is unlimited. The per-database
// and per-user overrides ([databases], [users]) are different, because
// there "not given" must differ from every real value: Unset (-1) marks a
// number not given and poolmode.Direct a pool_mode not given; the
// effective value is then the [pgbouncer] one (Settings.PoolFor works it
// out).
//
// # Guarantees
//
// Load refuses, naming file and line, a key PgBouncer 1.18 does not know,
// a value that does not parse, and an %include cycle. Keys PgBouncer knows
// but this type has no field for are kept in Settings.Other, so a consumer
// can say which ones it does not apply instead of dropping them silently.
package poolconf
