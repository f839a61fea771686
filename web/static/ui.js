// ui.js: the page's small helpers: elements, labelled sliders, numbers
// with their interval, the command line that prints the same JSON, and
// the view's URL.

import { fmtNum } from "./chart.js";

export function el(tag, attrs = {}, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs)) {
		if (k === "class") e.className = v;
		else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
		else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, v === true ? "" : v);
	}
	for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
	return e;
}

// html sets trusted markup written in this folder (lesson text with
// formulas); never user input.
export function prose(markup) {
	const d = el("div", { class: "prose" });
	d.innerHTML = markup;
	return d;
}

let sliderCount = 0;

// slider is a labelled native range input (element id id) with its value beside it. It
// calls onInput(value) as it moves; values[] (optional) are the choices a
// position picks.
export function slider({ id, label, min, max, step = 1, value, unit = "", values, onInput }) {
	id = id || "s" + ++sliderCount;
	const input = el("input", { type: "range", id, min: values ? 0 : min, max: values ? values.length - 1 : max, step: values ? 1 : step });
	const out = el("output", { for: id });
	const get = () => (values ? values[+input.value] : +input.value);
	const show = () => { out.textContent = get() + unit; };
	input.value = values ? Math.max(0, values.indexOf(value)) : value;
	show();
	input.addEventListener("input", () => { show(); onInput(get()); });
	return { root: el("div", { class: "slider" }, el("label", { for: id }, label), input, out), input, get,
		set(v) { input.value = values ? Math.max(0, values.indexOf(v)) : v; show(); } };
}

// stat is "estimate ± half-width" of metric name in a row's metrics, with
// the raw numbers in data- attributes for the browser test.
// A figure of another run than the panel's (an aside) is tagged
// data-aside-metric instead.
export function stat(metrics, name, scale = 1, digits = 4, aside = false) {
	const v = metrics[name], h = metrics[name + "_ci95"];
	const text = fmtNum(+(v * scale).toPrecision(digits)) + (h !== undefined ? " ± " + fmtNum(+(h * scale).toPrecision(2)) : "");
	return el("span", { class: "stat", [aside ? "data-aside-metric" : "data-metric"]: name, "data-value": String(v) }, text);
}

// theory is a formula's value; null (infinite) reads as none.
export function theory(v, scale = 1, digits = 4, none = "∞ (no steady state)") {
	return el("span", { class: "theory" }, v === null ? none : fmtNum(+(v * scale).toPrecision(digits)));
}

// quote is a shell word: single-quoted when it holds anything but safe
// characters.
function quote(s) {
	return /^[A-Za-z0-9_.,=/:%+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}

// commandLine is the poolsim command that prints the same JSON as req.
export function commandLine(req) {
	const a = [req.vary && req.vary.length ? "sweep" : "run", req.yaml ? "SCENARIO.yaml" : req.scenario];
	if (req.seed !== undefined && req.seed !== null) a.push("--seed", String(req.seed));
	for (const s of req.sets || []) a.push("--set", s);
	for (const v of req.vary || []) a.push("--vary", v);
	if (req.drop_sweep) a.push("--drop-sweep");
	if (req.replications) a.push("--replications", String(req.replications));
	a.push("--format", "json");
	return "poolsim " + a.map(quote).join(" ");
}

// params are the view's URL parameters: lesson, scenario, seed and every
// set=KEY=VALUE.
export function readParams() {
	const q = new URLSearchParams(location.search);
	const sets = {};
	for (const s of q.getAll("set")) {
		const i = s.indexOf("=");
		if (i > 0) sets[s.slice(0, i)] = s.slice(i + 1);
	}
	const seed = q.get("seed");
	return { lesson: q.get("lesson"), scenario: q.get("scenario"), seed: seed !== null && /^\d+$/.test(seed) ? +seed : null, sets, setList: q.getAll("set"), vary: q.get("vary") };
}

// writeParams puts the view into the address bar (no reload), so copying
// the URL reproduces it.
export function writeParams(lesson, req) {
	const q = new URLSearchParams();
	q.set("lesson", lesson);
	if (req.scenario && !req.yaml) q.set("scenario", req.scenario);
	if (req.seed !== undefined && req.seed !== null) q.append("seed", String(req.seed));
	for (const s of req.sets || []) q.append("set", s);
	for (const v of req.vary || []) q.append("vary", v);
	history.replaceState(null, "", "?" + q.toString());
}

// debounce calls f once the calls stop for ms.
export function debounce(f, ms = 40) {
	let t = 0;
	return (...a) => { clearTimeout(t); t = setTimeout(() => f(...a), ms); };
}

// runView shows the simulation's state in status (running, done in N ms,
// or the error) and records the last answer on window.poolsimLast for
// tests and the download link.
export function status(node, text, kind = "") {
	node.textContent = text;
	node.className = "status " + kind;
}
