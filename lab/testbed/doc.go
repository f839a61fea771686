// Package testbed is the model of the machine a live validation runs on:
// one small machine (this project's 2-vCPU VM) whose cores PostgreSQL's
// backends, the pooler process and the load driver share. Machine plugs
// it into the simulator through models/system's CPU port
// (system.Machine): the backends' statements and start-ups, the pooler's
// thread (PoolerOnCores) and the load driver's CPU per statement
// (DriverCPU, its threads and pgbench's scan) run on the server's cores
// there, shared by processor sharing or on a run queue per core as
// Linux's scheduler keeps them - idle-core scan and balancing, a core's
// wake-up by how long it idled, pinning, wake-up preemption, a backend's
// tail after its response - at a speed that varies window by window,
// beside a background of other work.
//
// It owns the scheduler's model and its parameters; poolsim validate
// (lab/validate) fits them to what it measures on the machine and reads
// the scheduler's own figures back (Stats). The parameters were fitted to
// one VM and are frozen: this package changes none of their meanings.
//
// Units: durations are sim.Time (int64 nanoseconds), CPU shares and the
// background in cores, speeds as factors of the calibrated speed, Stats'
// waits in µs per statement.
//
// Guarantees: as models/system's - a run on a Machine is deterministic
// (the same configuration and seed give the same result, bit for bit; its
// random streams are seeded from the run's seed) and starts no goroutines.
// The zero Machine changes nothing: the run is the production what-if.
package testbed
