// Pool modes: the same workload through direct connections and the
// three PgBouncer modes: throughput, waits, refusals, and the session
// features each mode breaks (the model's compatibility matrix).

import { el, prose, slider, stat } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point } from "../lesson.js";

const clientsValues = [10, 20, 40, 60, 100, 150, 200, 300];
const featureWords = {
	transactions: "multi-statement transactions", set_reset: "SET / RESET", listen: "LISTEN",
	sql_prepare: "SQL PREPARE", protocol_prepared: "protocol prepared statements", advisory_locks: "session advisory locks",
	with_hold_cursors: "WITH HOLD cursors", temp_tables: "temporary tables",
};

export function render(root, ctx) {
	const sim = panel(ctx, "modes");
	const p = ctx.params;
	let n = +(p.sets["workload.clients"] || 100);
	if (!clientsValues.includes(n)) n = 100;
	let pool = +(p.sets["pooler.default_pool_size"] || 20), prepared = p.sets["pooler.max_prepared_statements"] === "200";
	if (!(pool >= 2 && pool <= 20)) pool = 20;
	const table = el("div", { class: "table-wrap" });
	const compat = el("div", { class: "table-wrap" });
	const plotX = el("div"), plotW = el("div");
	const nS = slider({ id: "lesson-n", label: "Clients", values: clientsValues, value: n, onInput: (v) => { n = v; run(); } });
	const pS = slider({ id: "lesson-pool", label: "Pooler's server connections (default_pool_size)", min: 2, max: 20, value: pool, onInput: (v) => { pool = v; run(); } });
	const prep = el("input", { type: "checkbox", id: "lesson-prepared", checked: prepared, onchange: () => { prepared = prep.checked; run(); } });

	root.replaceChildren(el("h2", {}, "Pool modes: what you gain, what breaks"),
		el("div", { class: "cols" },
			el("div", {}, prose(`
<p>PostgreSQL here allows 20 connections (max_connections). The same clients, each running transactions of 6
statements (300 µs of server time each, 800 µs of application time between them), reach it four ways:</p>
<ul>
<li><b>direct</b>: each client opens its own connection; past 20 clients, the rest are refused.</li>
<li><b>session</b>: PgBouncer hands a client a server connection for the whole session; the others wait.</li>
<li><b>transaction</b>: a server connection only for the length of a transaction; between transactions it serves others.</li>
<li><b>statement</b>: a server connection for one statement at a time. A transaction of several statements cannot work (PgBouncer refuses it): the throughput shown is what statement-at-a-time sharing gives an application that needs no transactions.</li>
</ul>
<p>The finer the unit of sharing, the more clients a connection serves — and the more of a session's state is lost
between units: the table on the right is the model's compatibility matrix, which follows PgBouncer's feature table.</p>
<p class="try">Try: at 20 clients all modes serve everyone; at 100, direct refuses 80 clients, session makes them queue
for a whole session, transaction keeps throughput up. Turn on prepared statements in the pooler and see which
feature comes back in transaction mode.</p>`),
				el("div", { class: "controls" }, nS.root, pS.root,
					el("label", { class: "field" }, prep, " pooler keeps protocol-level prepared statements (max_prepared_statements = 200)"))),
			el("div", {}, plotX, plotW)),
		el("h3", {}, "Figures by mode"), table,
		el("h3", {}, "Which session features keep working"), compat, sim.root);

	async function run() {
		const req = { scenario: "pgbouncer-modes", seed: p.seed ?? 1, replications: 3,
			sets: [`workload.clients=${n}`, "workload.txns_per_session=10", "workload.query={dist: exp, mean: 300us}",
				"workload.think={dist: exp, mean: 800us}", `pooler.default_pool_size=${pool}`, `pooler.max_prepared_statements=${prepared ? 200 : 0}`] };
		const ans = await sim.run(req);
		if (!ans) return;
		const rows = ans.report.rows;
		const modes = rows.map((r) => r.params["pooler.mode"]);
		const cols = [["tps_steady", "tps steady"], ["p99_ms", "p99 ms"], ["wait_p99_ms", "wait p99 ms"], ["refused_txns", "refused txns"],
			["server_busy", "server busy"]];
		table.replaceChildren(el("table", {},
			el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "mode"), cols.map(([, l]) => el("th", { scope: "col" }, l)))),
			el("tbody", {}, rows.map((r) => el("tr", {}, el("th", { scope: "row" }, r.params["pooler.mode"]),
				cols.map(([k]) => el("td", {}, stat(r.metrics, k))))))));
		const features = Object.keys(rows[0].compat);
		compat.replaceChildren(el("table", {},
			el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "feature"), modes.map((m) => el("th", { scope: "col" }, m)))),
			el("tbody", {}, features.map((f) => el("tr", {}, el("th", { scope: "row" }, featureWords[f] || f),
				rows.map((r) => el("td", { class: r.compat[f] === "ok" ? "ok" : "breaks" }, r.compat[f] === "ok" ? "works" : "breaks")))))));
		const xs = modes.map((_, k) => k + 1);
		const label = { label: "pool mode", min: 0.5, max: modes.length + 0.5, ticks: modes.map((m, k) => ({ x: k + 1, label: m })) };
		chart(plotX, { title: `Throughput, ${n} clients`, x: label, y: { label: "tps_steady (/s)" },
			series: [{ label: "simulated ± 95 %", kind: "points", pts: rows.map((r, k) => point(xs[k], r.metrics, "tps_steady")) }] });
		chart(plotW, { title: "Latency: p99 of a transaction", x: label, y: { label: "ms" },
			series: [{ label: "p99 ± 95 %", kind: "points", pts: rows.map((r, k) => point(xs[k], r.metrics, "p99_ms")) },
				{ label: "wait p99 ± 95 %", kind: "points", pts: rows.map((r, k) => point(xs[k], r.metrics, "wait_p99_ms")) }] });
	}
	run();
}
