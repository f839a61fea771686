package validate

import (
	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
)

// ModelRun is a model's run as a row keeps it: the model's metrics and,
// on a test machine, what its scheduler did (testbed.Stats: the waits in
// the cores' queues, the preemptions, the driver threads' spread), which
// the report sets beside the kernel's counters.
type ModelRun struct {
	system.Metrics
	testbed.Stats
}

// runModel runs model config c.
func runModel(c system.Config) ModelRun {
	r := system.Run(c)
	return ModelRun{r.Metrics, testbed.StatsOf(r)}
}

// machineOf is the test machine model config c runs on: the zero one (no
// machine) if none.
func machineOf(c system.Config) testbed.Machine {
	m, _ := c.Machine.(testbed.Machine)
	return m
}

// onMachine changes the test machine model config c runs on.
func onMachine(c *system.Config, change func(m *testbed.Machine)) {
	m := machineOf(*c)
	change(&m)
	c.Machine = m
}
