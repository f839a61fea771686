// Open and closed clients: a closed loop of N clients (each thinks, then
// runs a transaction) against its asymptotic bounds and the knee N*, and
// the same offered load as open arrivals beside it.

import { el, prose, slider, stat, theory, commandLine } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point, unlessReplaced } from "../lesson.js";

const S = 0.01; // mean transaction time on a server, 10 ms
const Ns = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40];
const dense = Array.from({ length: 40 }, (_, k) => k + 1); // where the bound is drawn

export function render(root, ctx) {
	const sim = panel(ctx, "closed");
	const p = ctx.params;
	let c = +(p.sets["pooler.default_pool_size"] || 4);
	if (!(c >= 1 && c <= 10)) c = 4;
	const zm = /mean: *(\d+)ms/.exec(p.sets["workload.think"] || "");
	let z = zm && +zm[1] <= 100 && +zm[1] % 10 === 0 ? +zm[1] : 40; // think time, ms
	let n = 24;
	let last = null;
	const numbers = el("div", { class: "numbers", "aria-live": "polite" });
	const openBox = el("div", { class: "numbers", "aria-live": "polite" });
	const plotX = el("div"), plotR = el("div");
	const cS = slider({ id: "lesson-c", label: "Server connections in the pool, c", min: 1, max: 10, value: c, onInput: (v) => { c = v; run(); } });
	const zS = slider({ id: "lesson-z", label: "Think time Z (ms)", min: 0, max: 100, step: 10, value: z, onInput: (v) => { z = v; run(); } });
	const nS = slider({ id: "lesson-n", label: "Show N clients", values: Ns, value: n, onInput: (v) => { n = v; show(); runOpen(); } });

	root.replaceChildren(el("h2", {}, "Open and closed clients: the knee N*"),
		el("div", { class: "cols" },
			el("div", {}, prose(`
<p>An application server has a fixed number of clients, <b>N</b>: each runs a transaction (S = 10 ms on one of the
pool's <i>c</i> server connections, exponential), then thinks for Z, then runs the next. This is a <b>closed</b>
system: a client that waits sends nothing new, so the load regulates itself.</p>
<p>Two bounds hold whatever the distributions. With nobody waiting, each client completes one transaction every
S + Z, and the pool can complete at most c/S a second:</p>
<p class="formula">X ≤ min( N / (S + Z), c / S )</p>
<p>They cross at the <b>knee</b>, the number of clients the pool can take before anyone queues on average:</p>
<p class="formula">N* = (S + Z) / (S / c)</p>
<p>Past the knee throughput stays at c/S and every added client only adds waiting: the response time law
R = N/X − Z grows by S/c per client.</p>
<p>An <b>open</b> system has no such brake: clients arrive at a rate λ whatever happens inside. Offer the rate the N
clients would offer if nobody waited, λ = N/(S+Z): below the knee it is served with a short wait; past it λ exceeds
c/S and the queue grows for as long as arrivals last.</p>
<p class="try">Try: move N past the knee and compare the two latencies. Then lengthen the think time: N* moves right,
because each client asks for less.</p>`),
				el("div", { class: "controls" }, cS.root, zS.root, nS.root), numbers,
				el("h3", {}, "The same load, as open arrivals"), openBox),
			el("div", {}, plotX, plotR)),
		sim.root);

	function closedSets() {
		return ["workload.stmts_per_txn=1", "workload.txns_per_session=100", "workload.query={dist: exp, mean: 10ms}",
			`workload.think={dist: exp, mean: ${z}ms}`, "pooler.mode=transaction", `pooler.default_pool_size=${c}`, "pooler.hop=0s"];
	}

	const run = unlessReplaced(async () => {
		const req = { scenario: "pgbouncer-modes", seed: p.seed ?? 1, replications: 3, sets: closedSets(),
			vary: ["workload.clients=" + Ns.join(",")] };
		const [bounds, ans] = await Promise.all([
			// The last is N very large: its bound is the pool's capacity c/S.
			ctx.engine.formulas(dense.concat([1e6]).map((k) => ({ name: "closed_bounds", args: [k, z / 1000, S, S / c] })), "closed-theory"),
			sim.run(req)]);
		if (!ans) return;
		const law = await ctx.engine.formulas(ans.report.rows.map((r, k) => ({ name: "response_time_law", args: [Ns[k], r.metrics.tps_steady, z / 1000] })), "closed-theory");
		last = { ans, bounds, law };
		show();
		runOpen();
	});

	function show() {
		if (!last) return;
		const { ans, bounds, law } = last;
		const rows = ans.report.rows;
		const i = Ns.indexOf(n);
		const m = rows[i].metrics;
		const knee = bounds[0][1];
		sim.explainRow(ans, i);
		numbers.replaceChildren(
			el("div", {}, el("small", {}, "knee N* = (S+Z)/(S/c)"), theory(knee)),
			el("div", {}, el("small", {}, `bound on X at N = ${n} (/s)`), theory(bounds[n - 1][0])),
			el("div", {}, el("small", {}, "X simulated, tps_steady (/s)"), stat(m, "tps_steady")),
			el("div", {}, el("small", {}, "R simulated, mean latency (ms)"), stat(m, "mean_ms")),
			el("div", {}, el("small", {}, "R = N/X − Z (ms)"), theory(law[i][0], 1000)),
			el("div", {}, el("small", {}, "wait for a connection, p99 (ms)"), stat(m, "wait_p99_ms")));
		const marks = [{ x: knee, label: `N* = ${+knee.toPrecision(3)}` }];
		chart(plotX, { title: `Throughput, c = ${c}, S = 10 ms, Z = ${z} ms`, x: { label: "clients N" }, y: { label: "X (transactions/s)" },
			series: [{ label: "bound min(N/(S+Z), c/S)", kind: "line", pts: dense.map((x, k) => ({ x, y: bounds[k][0] })) },
				{ label: "simulated ± 95 %", kind: "points", pts: rows.map((r, k) => point(Ns[k], r.metrics, "tps_steady")) }], marks });
		chart(plotR, { title: "Response time", x: { label: "clients N" }, y: { label: "R (ms)" },
			series: [{ label: "N/X − Z from simulated X", kind: "line", dash: "5 4", pts: Ns.map((x, k) => ({ x, y: law[k][0] * 1000 })) },
				{ label: "simulated mean ± 95 %", kind: "points", pts: rows.map((r, k) => point(Ns[k], r.metrics, "mean_ms")) }], marks });
	}

	async function runOpen() {
		if (!last) return;
		const lambda = +(n / (S + z / 1000)).toPrecision(4);
		const req = { scenario: "erlang-c", seed: p.seed ?? 1, replications: 3,
			sets: [`workload.arrival_rate=${lambda}/s`, "workload.query={dist: exp, mean: 10ms}", `pooler.default_pool_size=${c}`,
				"workload.duration=20s", "workload.warmup=5s"] };
		openBox.replaceChildren(el("p", { class: "status busy" }, `simulating λ = ${lambda}/s…`));
		try {
			const ans = await ctx.engine.run(req, "closed-open");
			const m = ans.report.rows[0].metrics;
			openBox.replaceChildren(
				el("div", {}, el("small", {}, "offered λ = N/(S+Z)"), el("span", { class: "theory" }, lambda + "/s")),
				el("div", {}, el("small", {}, "capacity c/S (/s)"), theory(last.bounds[dense.length][0])),
				el("div", {}, el("small", {}, "open: mean latency (ms)"), stat(m, "mean_ms", 1, 4, true)),
				el("div", {}, el("small", {}, "open: still queued when arrivals stop"), stat(m, "backlog_end", 1, 4, true)),
				el("p", { class: "cmd wide" }, "Same numbers: ", el("code", { class: "cmdline" }, commandLine(req))));
		} catch (err) {
			if (!err.replaced) openBox.replaceChildren(el("p", { class: "status error" }, err.message));
		}
	}
	run();
}
