// Package report writes what poolsim prints about a run or a sweep: a
// table for people, CSV and JSON for programs, all three from one list of
// metrics (system.Fields) and, for the table, one list of columns held as
// data; and the self-describing shards of a sweep split across machines,
// with the merge that joins them into exactly the bytes of the unsharded
// output.
//
// Numbers: a row with replications shows each metric as its mean over them
// with the half-width of its 95 % confidence interval (Student t): in the
// table as "3304.9 ± 12.1", in CSV and JSON as the metric (the mean) and
// <metric>_ci95 (the half-width), with the row's replications. A row of
// one run shows its figures exactly as the model measured them.
//
// Guarantees: the output depends only on the rows (so on the scenario and
// seed), never on workers, timing or map order.
package report
