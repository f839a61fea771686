// lesson.js: what every lesson shares: the simulation panel (status, the
// command line that prints the same JSON, the row's explanation) and the
// call that runs a request in the worker and reports the result.

import { el, commandLine, writeParams, status } from "./ui.js";
import { fmtNum } from "./chart.js";

// panel makes the simulation's status line, command line and
// explanation box; run(req) runs req on the lesson's channel (a newer
// run replaces it), updates them and resolves with the answer, or with
// null when it was replaced or failed (the status says why).
export function panel(ctx, lessonId, { openExplain = false } = {}) {
	const statusNode = el("p", { class: "status", role: "status", "aria-live": "polite" }, "waiting for the simulator…");
	const cmd = el("code", { class: "cmdline" });
	const download = el("a", { class: "download", download: "poolsim.json", href: "#" }, "download the JSON");
	const explain = el("details", { class: "explain", open: openExplain }, el("summary", {}, "Explain this run (the text of poolsim run --explain)"));
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
			showExplanation(explain, ans, opts.explainRow ?? 0);
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
	return { root, run, explainRow(ans, i) { showExplanation(explain, ans, i); } };
}

// showExplanation puts row i's explanation (report.Explanation, the
// source of poolsim run --explain's text) in the box: each paragraph with
// its title, and its checks - a law's value beside the simulation's.
function showExplanation(box, ans, i) {
	const e = ans.explanation, row = e.rows[i];
	if (!row) return;
	const parts = [el("h3", {}, row.title)];
	for (const p of row.paragraphs) {
		parts.push(p.text.startsWith(p.title) ? el("p", {}, p.text) : el("p", {}, el("b", {}, p.title + ". "), p.text));
		if (p.checks && p.checks.length) {
			const head = el("tr", {}, ["quantity", "law", "computed", "measured", ""].map((h) => el("th", { scope: "col" }, h)));
			const body = p.checks.map((c) => el("tr", {},
				el("td", {}, c.name + (c.unit ? " (" + c.unit + ")" : "")),
				el("td", {}, c.law),
				el("td", {}, fmtNum(c.computed)),
				el("td", {}, fmtNum(c.measured)),
				el("td", {}, c.bound ? `${fmtNum(c.pct_of_bound)} % of the bound` : `error ${fmtNum(c.error_pct)} %`)));
			parts.push(el("div", { class: "table-wrap" }, el("table", { class: "checks" }, el("thead", {}, head), el("tbody", {}, body))));
		}
	}
	parts.push(el("p", {}, el("b", {}, "Assumptions. "), e.assumptions.join("; ") + "."));
	box.replaceChildren(box.firstChild, ...parts);
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

// unlessReplaced wraps an async step of a lesson: a call replaced by a
// newer one (a slider moved again) ends it quietly; other errors stay.
export function unlessReplaced(step) {
	return async (...args) => {
		try {
			await step(...args);
		} catch (err) {
			if (!err.replaced) throw err;
		}
	};
}
