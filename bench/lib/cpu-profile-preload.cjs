// Loaded into a service with NODE_OPTIONS="--require …/cpu-profile-preload.cjs" by `npm run bench
// -- --profile` (Node 20 refuses --cpu-prof in NODE_OPTIONS). SIGUSR2 starts the V8 CPU profiler;
// the next SIGUSR2 (or the exit of the process) stops it and writes
// <BENCH_CPU_PROF_DIR>/<pid>-<n>.cpuprofile, so a profile covers exactly the measured window.
// The in-process inspector session answers synchronously, so this also works in 'exit'.
const inspector = require("node:inspector");
const fs = require("node:fs");
const path = require("node:path");

const dir = process.env.BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 500 });
  let running = false;
  let n = 0;
  const stop = () => {
    running = false;
    session.post("Profiler.stop", (err, res) => {
      if (err || !res) return;
      fs.mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `${process.pid}-${++n}.cpuprofile`);
      fs.writeFileSync(`${file}.tmp`, JSON.stringify(res.profile));
      fs.renameSync(`${file}.tmp`, file);
    });
  };
  process.on("SIGUSR2", () => {
    if (running) return stop();
    running = true;
    session.post("Profiler.start");
  });
  process.once("exit", () => running && stop());
}
