// engine.js: the page's side of the simulator. One Web Worker runs one
// call at a time; calls wait in a queue. A call on a channel replaces the
// channel's earlier calls: a queued one is dropped, a running one is
// stopped by ending the worker (Go cannot be interrupted mid-run) and a
// new worker starts from the already compiled module, so a slider moved
// again never waits for a run nobody will read.

export class Replaced extends Error {
	constructor() { super("replaced by a newer run"); this.replaced = true; }
}

async function compile(url) {
	try {
		return await WebAssembly.compileStreaming(fetch(url));
	} catch (err) {
		// A host that serves .wasm without application/wasm: compile the bytes.
		const resp = await fetch(url);
		if (!resp.ok) throw new Error(`load ${url}: ${resp.status} ${resp.statusText}`);
		return WebAssembly.compile(await resp.arrayBuffer());
	}
}

export class Engine {
	constructor(url = "poolsim.wasm") {
		this.url = url;
		this.queue = [];
		this.running = null;
		this.nextId = 1;
		this.restarts = 0;
	}

	// start compiles the wasm and starts the worker; it resolves with the
	// milliseconds it took.
	async start() {
		const t0 = performance.now();
		this.module = await compile(this.url);
		this.spawn();
		await this.ready;
		return performance.now() - t0;
	}

	spawn() {
		const w = new Worker("worker.js");
		this.worker = w;
		this.ready = new Promise((resolve, reject) => {
			w.onmessage = (e) => {
				if (e.data.ready) {
					w.onmessage = (e) => this.finish(e.data);
					resolve();
				}
			};
			w.onerror = (e) => {
				reject(new Error("the simulator's worker failed: " + (e.message || e)));
				if (this.running) this.fail(new Error("the simulator's worker failed: " + (e.message || e)));
			};
		});
		w.postMessage({ module: this.module });
	}

	// call runs op (builtins, run, formulas) on req and resolves with the
	// answer and the milliseconds the call took in the worker.
	call(op, req, channel) {
		return new Promise((resolve, reject) => {
			if (channel) {
				this.queue = this.queue.filter((j) => {
					if (j.channel !== channel) return true;
					j.reject(new Replaced());
					return false;
				});
				if (this.running && this.running.channel === channel) {
					const old = this.running;
					this.running = null;
					this.worker.terminate();
					this.restarts++;
					old.reject(new Replaced());
					this.spawn();
				}
			}
			this.queue.push({ id: this.nextId++, op, req, channel, resolve, reject });
			this.pump();
		});
	}

	async pump() {
		if (this.running || this.queue.length === 0) return;
		const job = this.queue.shift();
		this.running = job;
		const worker = this.worker;
		try {
			await this.ready;
		} catch (err) {
			this.fail(err);
			return;
		}
		if (this.running === job && this.worker === worker) {
			worker.postMessage({ id: job.id, op: job.op, req: job.req });
		}
	}

	finish(data) {
		const job = this.running;
		if (!job || job.id !== data.id) return;
		this.running = null;
		const ans = JSON.parse(data.answer);
		if (ans.error) job.reject(new Error(ans.error));
		else job.resolve({ ok: ans.ok, ms: data.ms });
		this.pump();
	}

	fail(err) {
		const job = this.running;
		this.running = null;
		if (job) job.reject(err);
		this.pump();
	}

	// run simulates a RunRequest (web/api): report is the parsed JSON, raw
	// its exact bytes, explanation the rows' report.Explanation.
	async run(req, channel) {
		const { ok, ms } = await this.call("run", req, channel);
		return { raw: ok.report, report: JSON.parse(ok.report), explanation: ok.explanation, ms };
	}

	// formulas evaluates [{name, args}] (web/api.Evaluate): one array of
	// outputs per formula, null where a value is infinite.
	async formulas(list, channel) {
		const { ok } = await this.call("formulas", list, channel);
		return ok;
	}
}
