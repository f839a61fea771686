// Package api is what the browser page asks of the simulator: list the
// built-in scenarios, run a scenario (or sweep a key of it) and return
// exactly the bytes `poolsim run --format json` (or `poolsim sweep --format
// json`) writes for it, with the rows' explanation (report.Explain, the
// source `poolsim run --explain` prints its text from), and the analytic
// formulas the lessons plot. Requests and answers are JSON, so the same
// calls work from the WebAssembly build (web/wasm) and from a Go test.
//
// It owns no model: a run goes through scenarios.Scenario.Override,
// vary.Apply, scenarios.RunStudy, report.New and report.WriteJSON, the
// code path the command line takes, and a formula is a call into
// models/queueing or models/usl (the response time law R = N/X − Z, one
// line, is written here). Times are in seconds, rates per second, as in
// those packages. Every error is returned in the answer, prefixed with the
// operation; nothing panics on bad input.
package api
