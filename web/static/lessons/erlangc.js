// Erlang C: the probability of waiting and the mean wait of M/M/c by
// pool size, the formula's curve with the simulation's points on it.

import { el, prose, slider, stat, theory } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point, unlessReplaced } from "../lesson.js";

const S = 0.1; // the erlang-c scenario's mean statement time, 100 ms
const SPAN = 6; // pool sizes simulated: the smallest stable one and the next five

export function render(root, ctx) {
	const sim = panel(ctx, "erlang-c");
	const p = ctx.params;
	let lambda = parseFloat(p.sets["workload.arrival_rate"] || "80");
	lambda = Math.round(lambda / 10) * 10; // the slider's steps
	if (!(lambda >= 10 && lambda <= 150)) lambda = 80;
	let pick = 0; // which simulated pool size the numbers show
	let last = null;
	const numbers = el("div", { class: "numbers", "aria-live": "polite" });
	const plotP = el("div"), plotW = el("div");
	const lS = slider({ id: "lesson-lambda", label: "Arrival rate λ (/s)", min: 10, max: 150, step: 10, value: lambda, onInput: (v) => { lambda = v; run(); } });
	const cS = slider({ id: "lesson-pick", label: "Show the pool of size c", values: [0, 1, 2, 3, 4, 5].map(String), value: "0", onInput: (v) => { pick = +v; show(); } });

	root.replaceChildren(el("h2", {}, "Erlang C: how many connections?"),
		el("div", { class: "cols" },
			el("div", {}, prose(`
<p>Clients arrive at random (Poisson, rate λ) and each transaction holds one of the pool's <i>c</i> server
connections for an exponential time of mean S = 100 ms. The offered load is <i>a</i> = λS Erlangs: the mean number
of connections the work needs. With <i>c</i> &gt; <i>a</i> the queue is stable, and A. K. Erlang's formula (1917)
gives the probability that an arriving client must wait:</p>
<p class="formula">P(wait) = C(c, a) = <sup>a<sup>c</sup>/c! · c/(c−a)</sup> ⁄ <sub>Σ<sub>k&lt;c</sub> a<sup>k</sup>/k! + a<sup>c</sup>/c! · c/(c−a)</sub></p>
<p>and the mean wait in the queue</p>
<p class="formula">W<sub>q</sub> = C(c, a) · S / (c − a)</p>
<p>The lines are the formulas (computed by the same Go code the simulator's tests check against); the points are the
simulator, each ± its 95 % interval over 4 replications of 20 s.</p>
<p class="try">Try: at λ = 80/s (8 Erlangs), 9 connections leave about two clients in three waiting and 10 about two
in five; each connection more roughly halves it. Raise λ: the curve moves right and keeps its shape, but a bigger
pool runs busier for the same chance of waiting (the economy of scale: compare the "server busy" figure).</p>`),
				el("div", { class: "controls" }, lS.root, cS.root), numbers),
			el("div", {}, plotP, plotW)),
		sim.root);

	function sizes() {
		const c0 = Math.floor(lambda * S + 1e-9) + 1;
		return Array.from({ length: SPAN }, (_, k) => c0 + k);
	}

	const run = unlessReplaced(async () => {
		const cs = sizes();
		const req = { scenario: "erlang-c", seed: p.seed ?? 1, replications: 4,
			sets: [`workload.arrival_rate=${lambda}/s`, "workload.duration=20s", "workload.warmup=5s"],
			vary: ["pooler.default_pool_size=" + cs.join(",")] };
		const dense = [];
		for (let c = Math.max(1, cs[0] - 1); c <= cs[cs.length - 1] + 2; c++) dense.push(c);
		const [curve, ans] = await Promise.all([
			ctx.engine.formulas(dense.map((c) => ({ name: "erlang_c", args: [c, lambda, S] })), "erlang-c-theory"),
			sim.run(req)]);
		if (!ans) return;
		last = { ans, dense, curve, cs };
		show();
	});

	function show() {
		if (!last) return;
		const { ans, dense, curve, cs } = last;
		const rows = ans.report.rows;
		const i = Math.min(pick, rows.length - 1);
		const r = rows[i], m = r.metrics, c = cs[i];
		sim.explainRow(ans, i);
		const th = curve[dense.indexOf(c)];
		numbers.replaceChildren(
			el("div", {}, el("small", {}, `c = ${c}, a = λS`), el("span", { class: "theory" }, `${+(lambda * S).toPrecision(4)} Erlangs`)),
			el("div", {}, el("small", {}, "P(wait), Erlang C"), theory(th[0])),
			el("div", {}, el("small", {}, "P(wait), simulated"), stat(m, "wait_prob")),
			el("div", {}, el("small", {}, "W_q (ms), Erlang C"), theory(th[1], 1000)),
			el("div", {}, el("small", {}, "W_q (ms), simulated"), stat(m, "wait_W", 1000)),
			el("div", {}, el("small", {}, "server busy (ρ = a/c)"), stat(m, "server_busy")));
		const marks = [{ x: c, label: `c = ${c}` }];
		chart(plotP, { title: `Probability of waiting, λ = ${lambda}/s, S = 100 ms`, x: { label: "pool size c" }, y: { label: "P(wait)", max: 1 },
			series: [{ label: "Erlang C", kind: "line", pts: dense.map((x, k) => ({ x, y: curve[k][0] })) },
				{ label: "simulated ± 95 %", kind: "points", pts: rows.map((x, k) => point(cs[k], x.metrics, "wait_prob")) }], marks });
		chart(plotW, { title: "Mean wait for a connection", x: { label: "pool size c" }, y: { label: "W_q (ms)" },
			series: [{ label: "Erlang C", kind: "line", pts: dense.map((x, k) => ({ x, y: curve[k][1] === null ? null : curve[k][1] * 1000 })).filter((q) => q.x >= cs[0]) },
				{ label: "simulated ± 95 %", kind: "points", pts: rows.map((x, k) => point(cs[k], x.metrics, "wait_W", 1000)) }], marks });
		cS.root.querySelector("output").textContent = "c = " + c;
	}
	run();
}
