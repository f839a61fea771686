// Package lab holds no code of its own: it is the map of poolsim's lab,
// the parts that check the model against a real PostgreSQL, poolsim's
// proxy and a real PgBouncer. The product (sim, models, scenarios, proxy,
// and every command but validate) imports none of it; its tests may.
//
//	lab/pgcluster      a throwaway PostgreSQL cluster from the installed
//	                   binaries (initdb, pg_ctl) for tests and validate;
//	                   childproc starts and reaps its processes,
//	                   pgclustertest starts one for a test
//	lab/pgbouncer      a real PgBouncer with a generated configuration
//	lab/load           the load driver: real clients running a scenario's
//	                   workload through any target
//	lab/probe          the live session-feature probes (compat, for real)
//	lab/autogroup      the kernel's autogroup switch for a validation run
//	lab/importtest     the live set-up behind poolsim import's tests
//	lab/testbed        the model of the test machine the validator runs
//	                   on: its scheduler and load driver behind
//	                   models/system's CPU port (system.Machine)
//	lab/validate       poolsim validate: runs a scenario through the
//	                   proxy, PgBouncer or directly, and sets the
//	                   measurement beside the model (models/system);
//	                   the scenarios' validate: section is its
package lab
