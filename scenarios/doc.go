// Package scenarios loads and validates scenario YAML (docs/scenarios.md
// explains it and lists every key) into system configurations, expands the sweep: block
// into points, applies --set overrides, and holds the built-in scenarios
// embedded in the binary.
//
// Loading is strict: an unknown or repeated key is an error naming the key
// and its line, and every value is range-checked with a message that says
// what was expected. The same field table serves the YAML file, the sweep:
// block and --set key=value, so the three accept exactly the same values.
// Defaults are PgBouncer's and PostgreSQL's own (system.Default).
//
// The validate: section is not the model's: it says how poolsim validate
// runs the scenario live and what machine its models run on. This package
// keeps it as written, line numbers included, with its --set
// validate.KEY overrides (Scenario.Validate, a Section), and lab/validate
// decodes it as strictly, with the value readers this package exports
// (ReadDuration, ReadDist, ...); a sweep or a variant does not vary it,
// and a model run ignores it.
//
// Durations are Go duration strings ("300us", "5.48ms", "3s"); rates are a
// number per second, written "80/s", "4800/min" or "80". A duration key
// also takes a distribution (DistHelp lists the forms), including empirical
// ones read from samples, histogram buckets or a data file; a data file's
// relative path is resolved against the scenario file's folder when the
// scenario is parsed, and built-in scenarios carry their data inline.
// Counts that vary take an integer distribution (intDistInto): a whole
// number, {dist: uniform, min, max} or an empirical table.
package scenarios
