// chart.js draws small SVG charts: lines (theory), points with their 95 %
// interval as a bar (simulation), vertical marks (a knee, a peak). No
// library: the page fetches nothing it does not carry.

const NS = "http://www.w3.org/2000/svg";
const W = 640, H = 360, M = { l: 64, r: 16, t: 48, b: 46 };

function svg(tag, attrs = {}, text) {
	const e = document.createElementNS(NS, tag);
	for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
	if (text !== undefined) e.textContent = text;
	return e;
}

// ticks are about n round values covering [lo, hi].
function ticks(lo, hi, n = 5) {
	if (!(hi > lo)) return [lo];
	const raw = (hi - lo) / n;
	const mag = Math.pow(10, Math.floor(Math.log10(raw)));
	const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw) || raw;
	const out = [];
	for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
	return out;
}

function logTicks(lo, hi) {
	const out = [];
	for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
		for (const f of [1, 2, 5]) {
			const v = f * Math.pow(10, e);
			if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
		}
	}
	return out;
}

export function fmtNum(v) {
	if (v === null || v === undefined || !isFinite(v)) return "∞";
	const a = Math.abs(v);
	if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
	return +v.toPrecision(4) + "";
}

export const colors = ["#1f5fa8", "#c2410c", "#15803d", "#7e22ce", "#a16207", "#0f766e"];

// chart renders spec into the element host (replacing what it held):
//   {title, x: {label, log, min, max, ticks: [{x, label}]}, y: {label, log, min, max}, series: [{label, color,
//    kind: "line" | "points", pts: [{x, y, lo, hi}]}], marks: [{x, label}]}
// A y of null (an infinite wait) is left out of a line.
export function chart(host, spec) {
	const all = spec.series.flatMap((s) => s.pts).filter((p) => p.y !== null && isFinite(p.y));
	const xs = all.map((p) => p.x).concat((spec.marks || []).map((m) => m.x));
	const ys = all.flatMap((p) => [p.y, p.lo ?? p.y, p.hi ?? p.y]).filter(isFinite);
	let [x0, x1] = [spec.x.min ?? Math.min(...xs), spec.x.max ?? Math.max(...xs)];
	let [y0, y1] = [spec.y.min ?? Math.min(0, ...ys), spec.y.max ?? Math.max(...ys)];
	if (!isFinite(x0)) [x0, x1] = [0, 1];
	if (!isFinite(y1) || y1 <= y0) y1 = y0 + 1;
	if (x1 <= x0) x1 = x0 + 1;
	y1 += (y1 - y0) * 0.05;
	const xl = spec.x.log, yl = spec.y.log;
	const fx = (v) => M.l + (W - M.l - M.r) * (xl ? Math.log(v / x0) / Math.log(x1 / x0) : (v - x0) / (x1 - x0));
	const fy = (v) => H - M.b - (H - M.t - M.b) * (yl ? Math.log(v / y0) / Math.log(y1 / y0) : (v - y0) / (y1 - y0));
	const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart" });
	root.append(svg("title", {}, spec.title + ": " + spec.series.map((s) => s.label).join(", ")));
	root.append(svg("text", { x: M.l, y: 18, class: "chart-title" }, spec.title));
	const g = svg("g", { class: "axes" });
	for (const t of yl ? logTicks(y0, y1) : ticks(y0, y1)) {
		g.append(svg("line", { x1: M.l, x2: W - M.r, y1: fy(t), y2: fy(t), class: "grid" }));
		g.append(svg("text", { x: M.l - 6, y: fy(t) + 4, "text-anchor": "end" }, fmtNum(t)));
	}
	const xt = spec.x.ticks || (xl ? logTicks(x0, x1) : ticks(x0, x1, 6)).map((v) => ({ x: v, label: fmtNum(v) }));
	for (const t of xt) {
		g.append(svg("line", { x1: fx(t.x), x2: fx(t.x), y1: H - M.b, y2: H - M.b + 5 }));
		g.append(svg("text", { x: fx(t.x), y: H - M.b + 18, "text-anchor": "middle" }, t.label));
	}
	g.append(svg("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
	g.append(svg("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b }));
	g.append(svg("text", { x: (M.l + W - M.r) / 2, y: H - 8, "text-anchor": "middle", class: "label" }, spec.x.label));
	g.append(svg("text", { x: 14, y: (M.t + H - M.b) / 2, "text-anchor": "middle", class: "label", transform: `rotate(-90 14 ${(M.t + H - M.b) / 2})` }, spec.y.label));
	root.append(g);
	for (const m of spec.marks || []) {
		if (m.x < x0 || m.x > x1) continue;
		root.append(svg("line", { x1: fx(m.x), x2: fx(m.x), y1: M.t, y2: H - M.b, class: "mark" }));
		root.append(svg("text", { x: fx(m.x) + 4, y: M.t + 12, class: "mark-label" }, m.label));
	}
	const legend = [];
	spec.series.forEach((s, i) => {
		const color = s.color || colors[i % colors.length];
		const pts = s.pts.filter((p) => p.y !== null && isFinite(p.y) && p.y >= y0 && p.x >= x0 && p.x <= x1);
		if (s.kind === "line") {
			const d = pts.map((p, k) => (k ? "L" : "M") + fx(p.x).toFixed(1) + " " + fy(Math.min(p.y, y1)).toFixed(1)).join("");
			root.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": s.dash || "" }));
		} else {
			for (const p of pts) {
				if (p.lo !== undefined && p.hi !== undefined && p.hi > p.lo) {
					const lo = Math.max(p.lo, y0), hi = Math.min(p.hi, y1);
					root.append(svg("line", { x1: fx(p.x), x2: fx(p.x), y1: fy(lo), y2: fy(hi), stroke: color, "stroke-width": 1.5 }));
					for (const v of [lo, hi]) root.append(svg("line", { x1: fx(p.x) - 4, x2: fx(p.x) + 4, y1: fy(v), y2: fy(v), stroke: color, "stroke-width": 1.5 }));
				}
				const c = svg("circle", { cx: fx(p.x), cy: fy(Math.min(p.y, y1)), r: 4, fill: color });
				c.append(svg("title", {}, `${spec.x.label} ${fmtNum(p.x)}: ${fmtNum(p.y)}` + (p.hi !== undefined ? ` ± ${fmtNum((p.hi - p.lo) / 2)}` : "")));
				root.append(c);
			}
		}
		legend.push([s.label, color, s.kind, s.dash]);
	});
	let lx = W - M.r;
	for (const [label, color, kind, dash] of legend.reverse()) {
		const t = svg("text", { x: lx, y: 38, "text-anchor": "end", class: "legend" }, label);
		root.append(t);
		const width = label.length * 6.6 + 26;
		lx -= width;
		if (kind === "line") root.append(svg("line", { x1: lx + 4, x2: lx + 18, y1: 34, y2: 34, stroke: color, "stroke-width": 2, "stroke-dasharray": dash || "" }));
		else root.append(svg("circle", { cx: lx + 11, cy: 34, r: 4, fill: color }));
	}
	host.replaceChildren(root);
}
