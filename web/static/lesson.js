// lesson.js: what every lesson shares: the simulation panel (status, the
// command line that prints the same JSON, the row's explanation) and the
// call that runs a request in the worker and reports the result.

import { el, commandLine, writeParams, status } from "./ui.js";

// panel makes the simulation's status line, command line and
// explanation box; run(req) runs req on the lesson's channel (a newer
// run replaces it), updates them and resolves with the answer, or with
// null when it was replaced or failed (the status says why).
export function panel(ctx, lessonId) {
	const statusNode = el("p", { class: "status", role: "status", "aria-live": "polite" }, "waiting for the simulator…");
	const cmd = el("code", { class: "cmdline" });
	const download = el("a", { class: "download", download: "poolsim.json", href: "#" }, "download the JSON");
	const explain = el("details", { class: "explain" }, el("summary", {}, "Explain this run (the text of poolsim run --explain)"));
	const root = el("section", { class: "sim", "aria-label": "simulation" }, statusNode,
		el("p", { class: "cmd" }, "Same numbers on the command line: ", cmd, " · ", download), explain);
	let url = "";
	async function run(req, opts = {}) {
		writeParams(lessonId, req);
		cmd.textContent = commandLine(req);
		status(statusNode, "simulating…", "busy");
		root.dataset.state = "busy";
		try {
			const ans = await ctx.engine.run(req, lessonId);
			const txns = ans.report.rows.reduce((s, r) => s + r.metrics.ok_txns * r.replications, 0);
			status(statusNode, `simulated ${Math.round(txns).toLocaleString("en")} transactions in ${Math.round(ans.ms)} ms` +
				` (${ans.report.rows.length} row${ans.report.rows.length > 1 ? "s" : ""}, seed ${ans.report.seed})`, "ok");
			window.poolsimLast = { lesson: lessonId, request: req, command: cmd.textContent, raw: ans.raw, ms: ans.ms, txns };
			if (url) URL.revokeObjectURL(url);
			url = URL.createObjectURL(new Blob([ans.raw], { type: "application/json" }));
			download.href = url;
			download.download = (ans.report.scenario || "poolsim") + ".json";
			const which = opts.explainRow ?? 0;
			const paras = (ans.rows[which] || { explain: [] }).explain;
			explain.replaceChildren(explain.firstChild, ...paras.map((p) => el("p", {}, p)));
			root.dataset.state = "done";
			ctx.firstResult();
			return ans;
		} catch (err) {
			if (err.replaced) return null;
			status(statusNode, String(err.message || err), "error");
			root.dataset.state = "error";
			return null;
		}
	}
	return { root, run, explainRow(ans, i) {
		const paras = (ans.rows[i] || { explain: [] }).explain;
		explain.replaceChildren(explain.firstChild, ...paras.map((p) => el("p", {}, p)));
	} };
}

// row finds the report's row whose params match want (every key given).
export function row(report, want) {
	return report.rows.find((r) => Object.entries(want).every(([k, v]) => String(r.params[k]) === String(v)));
}

// point is a chart point of metric name in a row: the estimate and its
// 95 % interval (when the row has replications).
export function point(x, metrics, name, scale = 1) {
	const y = metrics[name] * scale, h = metrics[name + "_ci95"];
	return h === undefined ? { x, y } : { x, y, lo: y - h * scale, hi: y + h * scale };
}
