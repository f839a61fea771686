// Your scenario: pick a built-in or paste YAML, set keys, sweep one, run;
// the table, a plot, each row's explanation and the JSON to download.

import { el, prose, stat } from "../ui.js";
import { chart } from "../chart.js";
import { panel, point } from "../lesson.js";

const columns = [
	["tps_steady", "tps steady", 1], ["tps", "tps", 1], ["p50_ms", "p50 ms", 1], ["p99_ms", "p99 ms", 1],
	["wait_prob", "P(wait)", 1], ["wait_p99_ms", "wait p99 ms", 1], ["server_busy", "busy", 1],
	["conn_refused", "refused", 1], ["wait_timeouts", "timeouts", 1],
];

export function render(root, ctx) {
	const sim = panel(ctx, "your-scenario", { openExplain: true });
	const pick = el("select", { id: "pick" }, el("option", { value: "" }, "(your own YAML)"));
	const yaml = el("textarea", { id: "yaml", rows: 14, spellcheck: "false" });
	const seed = el("input", { type: "number", id: "seed", min: 0, placeholder: "the scenario's" });
	const sets = el("textarea", { id: "sets", rows: 3, spellcheck: "false", placeholder: "workload.clients=100" });
	const key = el("select", { id: "varykey" }, el("option", { value: "" }, "(no sweep: the scenario's own)"));
	const values = el("input", { type: "text", id: "varyvalues", placeholder: "10..200/log or 5,10,20", size: 18 });
	const reps = el("input", { type: "number", id: "reps", min: 1, max: 200, placeholder: "the scenario's" });
	const runBtn = el("button", { type: "submit" }, "Run");
	const metric = el("select", { id: "metric", "aria-label": "plotted figure" }, columns.map(([k, l]) => el("option", { value: k }, l)));
	const plot = el("div", { class: "plot" });
	const table = el("div", { class: "table-wrap" });
	const builtins = {};
	let last = null;

	const form = el("form", { class: "controls", onsubmit: (e) => { e.preventDefault(); go(); } },
		el("label", { class: "field" }, el("span", {}, "Built-in scenario"), pick),
		el("label", { class: "field" }, el("span", {}, "Scenario YAML (edit it freely: the run uses this text)"), yaml),
		el("div", { class: "cols" },
			el("div", {},
				el("label", { class: "field" }, el("span", {}, "Seed"), seed),
				el("label", { class: "field" }, el("span", {}, "Replications (each figure ± its 95 % interval)"), reps)),
			el("div", {},
				el("label", { class: "field" }, el("span", {}, "Set keys, one key=value a line (as --set)"), sets),
				el("label", { class: "field" }, el("span", {}, "Sweep a key (as poolsim sweep --vary)"), key, " = ", values))),
		runBtn);

	root.replaceChildren(el("h2", {}, "Your scenario"),
		prose(`<p>Run any scenario the <code>poolsim</code> command runs: pick a built-in or paste your own YAML,
		override keys, sweep one, and read the table, the plot and each row's explanation. The JSON you download
		is byte for byte what the command line below prints.</p>`),
		form, el("h3", {}, "Results"), el("label", { class: "field" }, el("span", {}, "Plot"), metric), plot, table, sim.root);

	function request() {
		const req = {};
		const name = pick.value;
		if (name && builtins[name] === yaml.value) req.scenario = name;
		else req.yaml = yaml.value;
		if (seed.value !== "") req.seed = +seed.value;
		const s = sets.value.split("\n").map((x) => x.trim()).filter(Boolean);
		if (s.length) req.sets = s;
		if (key.value && values.value.trim()) req.vary = [key.value + "=" + values.value.trim()];
		if (reps.value !== "") req.replications = +reps.value;
		return req;
	}

	async function go() {
		const ans = await sim.run(request());
		if (!ans) return;
		last = ans;
		draw();
	}

	function draw() {
		const rep = last.report;
		const keys = rep.rows.length ? Object.keys(rep.rows[0].params) : [];
		const head = el("tr", {}, keys.map((k) => el("th", { scope: "col" }, k)), columns.map(([, l]) => el("th", { scope: "col" }, l)));
		const body = rep.rows.map((r, i) => el("tr", { tabindex: 0, title: "show this row's explanation", onclick: () => sim.explainRow(last, i),
			onkeydown: (e) => { if (e.key === "Enter") sim.explainRow(last, i); } },
			keys.map((k) => el("td", {}, String(r.params[k]))), columns.map(([m]) => el("td", {}, stat(r.metrics, m)))));
		table.replaceChildren(el("table", {}, el("caption", { class: "status" }, "Each figure ± its 95 % interval when replicated; Enter or a click on a row explains it."),
			el("thead", {}, head), el("tbody", {}, body)));
		// x: the first swept key with numbers; one line per value of the others.
		const xKey = keys.find((k) => rep.rows.every((r) => typeof r.params[k] === "number"));
		const m = metric.value;
		if (!xKey) {
			plot.replaceChildren(el("p", { class: "status" }, "Sweep a numeric key to plot it."));
			return;
		}
		const groups = new Map();
		for (const r of rep.rows) {
			const g = keys.filter((k) => k !== xKey).map((k) => `${k}=${r.params[k]}`).join(", ") || m;
			if (!groups.has(g)) groups.set(g, []);
			groups.get(g).push(point(r.params[xKey], r.metrics, m));
		}
		chart(plot, { title: `${m} by ${xKey}`, x: { label: xKey }, y: { label: m },
			series: [...groups].map(([label, pts]) => ({ label, kind: "points", pts })) });
	}
	metric.addEventListener("change", () => last && draw());
	pick.addEventListener("change", () => { if (pick.value) yaml.value = builtins[pick.value]; });

	ctx.engine.call("builtins", {}).then(({ ok }) => {
		for (const b of ok.scenarios) {
			builtins[b.name] = b.yaml;
			pick.append(el("option", { value: b.name }, `${b.name} - ${b.description}`));
		}
		for (const k of ok.keys) key.append(el("option", { value: k }, k));
		const p = ctx.params;
		const name = p.scenario && builtins[p.scenario] !== undefined ? p.scenario : "pgbouncer-modes";
		pick.value = name;
		yaml.value = builtins[name];
		if (p.seed !== null) seed.value = p.seed;
		sets.value = p.setList.join("\n");
		if (p.vary) {
			const i = p.vary.indexOf("=");
			key.value = p.vary.slice(0, i);
			values.value = p.vary.slice(i + 1);
		}
		go();
	});
}
