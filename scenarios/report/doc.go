// Package report writes what poolsim prints about a run or a sweep: a
// table for people, CSV and JSON for programs, all three from one list of
// metrics (system.Fields) and, for the table, one list of columns held as
// data; and the self-describing shards of a sweep split across machines,
// with the merge that joins them into exactly the bytes of the unsharded
// output. The teaching view (run --explain) is one value, Explanation,
// assembled by Explain from system.Explain's paragraphs: WriteExplanation
// prints it as text, the JSON report carries it as "explanation", and the
// browser page reads the same value.
//
// Numbers: a row with replications shows each metric as the study's
// estimate with the half-width of its 95 % confidence interval - a mean
// with Student t's interval, a percentile of all the replications' samples
// together with a jackknife's (system.Replicated.Stat): in the table as
// "3304.9 ± 12.1", in CSV and JSON as the metric and <metric>_ci95 (the
// half-width), with the row's replications. A row of one run shows its
// figures exactly as the model measured them. What the study found about a
// row's figures (runs too short for it, a precision goal not reached:
// scenarios.Row.Notes) follows the table as notes, and is each JSON row's
// "notes"; CSV carries none.
//
// Guarantees: the output depends only on the rows (so on the scenario and
// seed), never on workers, timing or map order.
package report
