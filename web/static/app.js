// app.js: the page. It starts the simulator in a worker, shows the lesson
// the URL names (?lesson=ID; with ?scenario= and no lesson, "your
// scenario"), and keeps the URL in step with what is on screen.

import { Engine } from "./engine.js";
import { el, readParams } from "./ui.js";

export const lessons = [
	{ id: "little", title: "Little's law", file: "./lessons/little.js" },
	{ id: "erlang-c", title: "Erlang C", file: "./lessons/erlangc.js" },
	{ id: "closed", title: "Open and closed clients", file: "./lessons/closed.js" },
	{ id: "modes", title: "Pool modes", file: "./lessons/modes.js" },
	{ id: "usl", title: "CPU contention", file: "./lessons/usl.js" },
	{ id: "your-scenario", title: "Your scenario", file: "./lessons/scenario.js" },
];

const t0 = performance.now();
const stats = (window.poolsimStats = { engineMs: null, firstResultMs: null, restarts: 0 });

function nav(current) {
	return el("nav", { "aria-label": "lessons" }, el("ul", {}, lessons.map((l) =>
		el("li", {}, el("a", { href: "?lesson=" + l.id, "aria-current": l.id === current ? "page" : false }, l.title)))));
}

async function main() {
	const params = readParams();
	let id = params.lesson || (params.scenario ? "your-scenario" : "little");
	let lesson = lessons.find((l) => l.id === id);
	const mainNode = document.getElementById("main");
	document.getElementById("nav").replaceWith(nav(lesson ? id : ""));
	if (!lesson) {
		mainNode.replaceChildren(el("p", { class: "status error" }, `No lesson "${id}": pick one above.`));
		return;
	}
	document.title = lesson.title + " · poolsim";
	const engine = new Engine();
	window.poolsimEngine = engine; // for the browser test and the curious
	const ctx = {
		engine, params,
		firstResult() {
			if (stats.firstResultMs === null) {
				stats.firstResultMs = performance.now() - t0;
				document.body.dataset.ready = "1";
			}
			stats.restarts = engine.restarts;
		},
	};
	const [mod] = await Promise.all([import(lesson.file), engine.start().then((ms) => { stats.engineMs = ms; })
		.catch((err) => { mainNode.prepend(el("p", { class: "status error" }, "The simulator did not start: " + err.message)); throw err; })]);
	mod.render(mainNode, ctx);
}

main();
