// Little's law: L = λW on the pooler's wait queue and on the whole
// system, measured three ways while the load moves.

import { el, prose, slider, stat, theory } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point, unlessReplaced } from "../lesson.js";

const S = 0.1; // the erlang-c scenario's mean statement time, 100 ms
const rhos = [0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95];

export function render(root, ctx) {
	const sim = panel(ctx, "little");
	const p = ctx.params;
	let c = +(p.sets["pooler.default_pool_size"] || 10);
	if (!(c >= 1 && c <= 16)) c = 10;
	let rho = 0.8;
	let last = null;
	const numbers = el("div", { class: "numbers", "aria-live": "polite" });
	const plot = el("div");
	const cS = slider({ id: "lesson-c", label: "Servers in the pool, c", min: 1, max: 16, value: c, onInput: (v) => { c = v; run(); } });
	const rS = slider({ id: "lesson-rho", label: "Load, ρ = λS/c", values: rhos, value: rho, onInput: (v) => { rho = v; show(); } });

	root.replaceChildren(el("h2", {}, "Little's law"),
		el("div", { class: "cols" },
			el("div", {}, prose(`
<p>In any system that is steady, the mean number inside equals the rate things arrive times the mean time each stays:</p>
<p class="formula">L = λ W</p>
<p>No assumption about the arrival pattern, the service times or the order of service. Here clients arrive at random
(Poisson, rate λ) at a transaction pooler with <i>c</i> server connections; each transaction takes S = 100 ms on a
server. The simulator measures λ, W and L <em>independently</em>: λ by counting departures from the queue, W by
timing each client's wait, L by integrating the queue's length over time. Little's law says the last must equal the
product of the first two.</p>
<p>Check it twice: on the <b>wait queue</b> alone (L<sub>q</sub> = λ W<sub>q</sub>), and on the <b>whole system</b>,
waiting plus being served: L = throughput × mean latency, where L is the waiting L<sub>q</sub> plus the busy servers
(utilisation × c).</p>
<p class="try">Try: push ρ towards 0.95 and watch L and W grow together, far faster than the load. Then give the pool
more servers at the same ρ: each is as busy as before, λ grows with them, yet W falls (that is Erlang C's lesson). Each point is 20 s of arrivals, replicated 5 times, so each figure is shown
± its 95 % interval.</p>`),
				el("div", { class: "controls" }, cS.root, rS.root)),
			el("div", {}, numbers, plot)),
		sim.root);

	function rates() { return rhos.map((r) => +(r * c / S).toPrecision(4)); }

	const run = unlessReplaced(async () => {
		const req = { scenario: "erlang-c", seed: p.seed ?? 1, replications: 5,
			sets: ["workload.duration=20s", "workload.warmup=5s", `pooler.default_pool_size=${c}`],
			vary: ["workload.arrival_rate=" + rates().map((l) => l + "/s").join(",")] };
		const [ans, theoryOut] = await Promise.all([sim.run(req),
			ctx.engine.formulas(rates().map((l) => ({ name: "erlang_c", args: [c, l, S] })), "little-theory")]);
		if (!ans) return;
		// Erlang C's L_q, by Little's law from its W_q (null: no steady state).
		const lq = await ctx.engine.formulas(rates().map((l, k) => ({ name: "little", args: [l, theoryOut[k][1] ?? 0] })), "little-theory");
		const prods = await ctx.engine.formulas(ans.report.rows.map((x) => ({ name: "little", args: [x.metrics.wait_lambda, x.metrics.wait_W] })), "little-theory");
		last = { ans, products: prods.map((x) => x[0]), lq: lq.map((x, k) => (theoryOut[k][1] === null ? null : x[0])) };
		show();
	});

	const show = unlessReplaced(async () => {
		if (!last) return;
		const i = rhos.indexOf(rho);
		const r = last.ans.report.rows[i];
		if (!r) return;
		sim.explainRow(last.ans, i);
		const m = r.metrics;
		const lambda = parseFloat(r.params["workload.arrival_rate"]);
		const [[lq], [lsys]] = await ctx.engine.formulas([
			{ name: "little", args: [m.wait_lambda, m.wait_W] },
			{ name: "little", args: [m.tps_steady, m.mean_ms / 1000] }], "little-products");
		const busyL = m.wait_L + m.server_busy * c;
		numbers.replaceChildren(
			el("div", {}, el("small", {}, "offered λ"), el("span", { class: "theory" }, lambda + "/s")),
			el("div", {}, el("small", {}, "wait queue: λ measured (/s)"), stat(m, "wait_lambda")),
			el("div", {}, el("small", {}, "wait queue: W measured (ms)"), stat(m, "wait_W", 1000)),
			el("div", {}, el("small", {}, "wait queue: L measured"), stat(m, "wait_L")),
			el("div", {}, el("small", {}, "wait queue: λ × W"), theory(lq)),
			el("div", {}, el("small", {}, "Erlang C's L_q = λ W_q"), theory(last.lq[i])),
			el("div", {}, el("small", {}, "system: throughput (/s)"), stat(m, "tps_steady")),
			el("div", {}, el("small", {}, "system: mean latency (ms)"), stat(m, "mean_ms")),
			el("div", {}, el("small", {}, "system: L measured (L_q + busy × c)"), theory(busyL)),
			el("div", {}, el("small", {}, "system: throughput × latency"), theory(lsys)));
		const rows = last.ans.report.rows;
		const xs = rows.map((x) => parseFloat(x.params["workload.arrival_rate"]));
		chart(plot, { title: `Wait queue length, c = ${c}, S = 100 ms`, x: { label: "arrival rate λ (/s)" }, y: { label: "mean number waiting L_q" },
			series: [
				{ label: "Erlang C", kind: "line", pts: xs.map((x, k) => ({ x, y: last.lq[k] })) },
				{ label: "λ×W measured", kind: "line", dash: "5 4", pts: last.products.map((y, k) => ({ x: xs[k], y })) },
				{ label: "L measured ± 95 %", kind: "points", pts: rows.map((x, k) => point(xs[k], x.metrics, "wait_L")) },
			], marks: [{ x: lambda, label: `ρ = ${rho}` }] });
	});
	run();
}
