// fetch_loop.mjs PORT N C - node's fetch() from C async workers at once,
// each looping `await fetch(url); await r.arrayBuffer()` until N requests
// are done: a sustained C requests in flight, one event loop settling them
// all (limiter_own_lag.sh). Prints {"codes":{status:count},"errs":{code:count}}.
const [port, N, C] = process.argv.slice(2).map(Number);
const codes = {}, errs = {};
let started = 0;
async function worker() {
  while (started < N) {
    started++;
    try {
      const r = await fetch(`http://127.0.0.1:${port}/f.txt`);
      await r.arrayBuffer();
      codes[r.status] = (codes[r.status] || 0) + 1;
    } catch (e) {
      const k = (e.cause && e.cause.code) || e.message;
      errs[k] = (errs[k] || 0) + 1;
    }
  }
}
await Promise.all(Array.from({ length: C }, worker));
console.log(JSON.stringify({ codes, errs }));
