// CPU contention and the USL peak: N clients with no think time run
// CPU-only statements; each running statement slows by the Universal
// Scalability Law's factor, so throughput rises, peaks and falls.

import { el, prose, slider, stat, theory } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point, unlessReplaced } from "../lesson.js";

const D = 0.001; // CPU per statement, 1 ms: λ = 1/D = 1000/s at N = 1
const Ns = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64];
const dense = Array.from({ length: 64 }, (_, k) => k + 1);

export function render(root, ctx) {
	const sim = panel(ctx, "usl");
	const p = ctx.params;
	// The URL's values when they are among the sliders' (a view is reproducible).
	const from = (key, values, def) => (values.includes(+p.sets[key]) ? +p.sets[key] : def);
	const sigmas = [0, 0.01, 0.02, 0.05, 0.1, 0.2], kappas = [0, 0.0002, 0.0005, 0.001, 0.002, 0.005], coreCounts = [2, 4, 8, 16, 32, 64];
	let sigma = from("server.contention", sigmas, 0.05), kappa = from("server.coherency", kappas, 0.002), cores = from("server.cores", coreCounts, 64), n = 24;
	const numbers = el("div", { class: "numbers", "aria-live": "polite" });
	const plotX = el("div"), plotR = el("div");
	let last = null;
	const sS = slider({ id: "lesson-sigma", label: "Contention σ (server.contention)", values: sigmas, value: sigma, onInput: (v) => { sigma = v; run(); } });
	const kS = slider({ id: "lesson-kappa", label: "Coherency κ (server.coherency)", values: kappas, value: kappa, onInput: (v) => { kappa = v; run(); } });
	const cS = slider({ id: "lesson-cores", label: "Server cores", values: coreCounts, value: cores, onInput: (v) => { cores = v; run(); } });
	const nS = slider({ id: "lesson-n", label: "Show N clients", values: Ns, value: n, onInput: (v) => { n = v; show(); } });

	root.replaceChildren(el("h2", {}, "CPU contention: the USL peak"),
		el("div", { class: "cols" },
			el("div", {}, prose(`
<p>N clients, each connected directly, run one CPU-only statement after another (1 ms of CPU each, no think time).
If the statements did not disturb each other, N of them would complete N times as fast. They do disturb each
other: they queue for shared locks and buffers (<b>contention</b>, σ) and pay to keep shared data consistent
between them (<b>coherency</b>, κ, which grows with the pairs of statements, N(N−1)). poolsim slows every running
statement by Gunther's Universal Scalability Law factor, so with as many cores as clients the throughput is</p>
<p class="formula">X(N) = λN / (1 + σ(N−1) + κN(N−1))</p>
<p>with λ = 1/D = 1000/s. It peaks at</p>
<p class="formula">N* = √((1−σ)/κ)</p>
<p>and past the peak adding clients <em>lowers</em> throughput: the reason a pool smaller than the number of clients
can be faster. With fewer cores than running statements, they also share the cores, and throughput stays under
cores/D.</p>
<p class="try">Try: set κ to 0: no peak, throughput flattens towards λ/σ (Amdahl's law). Then take the cores down to 8:
the simulation leaves the USL curve where N passes the cores.</p>`),
				el("div", { class: "controls" }, sS.root, kS.root, cS.root, nS.root), numbers),
			el("div", {}, plotX, plotR)),
		sim.root);

	const run = unlessReplaced(async () => {
		const req = { scenario: "pgbouncer-modes", seed: p.seed ?? 1, replications: 3,
			sets: ["pooler.mode=direct", "server.max_connections=100", "workload.stmts_per_txn=1", "workload.query=0s", "workload.think=0s",
				"workload.cpu={dist: exp, mean: 1ms}", `server.cores=${cores}`, `server.contention=${sigma}`, `server.coherency=${kappa}`,
				"workload.txns_per_session=100"],
			vary: ["workload.clients=" + Ns.join(",")] };
		const [curve, ans] = await Promise.all([
			ctx.engine.formulas(dense.map((k) => ({ name: "usl", args: [sigma, kappa, 1 / D, k] }))
				.concat([{ name: "usl_peak", args: [sigma, kappa, 1 / D] }]), "usl-theory"),
			sim.run(req)]);
		if (!ans) return;
		last = { ans, curve };
		show();
	});

	function show() {
		if (!last) return;
		const { ans, curve } = last;
		const rows = ans.report.rows;
		const i = Ns.indexOf(n);
		const m = rows[i].metrics;
		const [peakN, peakX] = curve[dense.length];
		sim.explainRow(ans, i);
		numbers.replaceChildren(
			el("div", {}, el("small", {}, "USL peak N*"), theory(peakN, 1, 4, "none: κ = 0")),
			el("div", {}, el("small", {}, "USL X at the peak (/s)"), theory(peakX, 1, 4, "none: κ = 0")),
			el("div", {}, el("small", {}, `USL X(${n}) (/s)`), theory(curve[n - 1][0])),
			el("div", {}, el("small", {}, `simulated X(${n}), tps_steady (/s)`), stat(m, "tps_steady")),
			el("div", {}, el("small", {}, "CPU busy (of all cores)"), stat(m, "cpu_util")),
			el("div", {}, el("small", {}, "statements running, L"), stat(m, "cpu_jobs_L")));
		const marks = peakN !== null && isFinite(peakN) ? [{ x: peakN, label: `N* = ${+peakN.toPrecision(3)}` }] : [];
		chart(plotX, { title: `Throughput, σ = ${sigma}, κ = ${kappa}, ${cores} cores`, x: { label: "clients N" }, y: { label: "X (statements/s)" },
			series: [{ label: "USL", kind: "line", pts: dense.map((x, k) => ({ x, y: curve[k][0] })) },
				{ label: "simulated ± 95 %", kind: "points", pts: rows.map((r, k) => point(Ns[k], r.metrics, "tps_steady")) }], marks });
		chart(plotR, { title: "Latency of a statement", x: { label: "clients N" }, y: { label: "ms" },
			series: [{ label: "USL R(N) = N/X(N)", kind: "line", pts: dense.map((x, k) => ({ x, y: curve[k][1] * 1000 })) },
				{ label: "simulated mean ± 95 %", kind: "points", pts: rows.map((r, k) => point(Ns[k], r.metrics, "mean_ms")) }], marks });
	}
	run();
}
