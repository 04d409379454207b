// A helper process of a scenario (a load generator, websocket subscribers), forked so that it shares no
// event loop with the driver, and driven by request/answer messages: the child sends `{ ready: true }`
// once it can take calls, then answers each `{ id, op, args }` with `{ id, result }` or `{ id, error }`.
import { fork } from 'node:child_process';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Forks `script` with `params` (JSON, its argv[2]) and resolves once it is ready, with `call(op, args,
 * timeoutMs)` (every call bounded in time; with `killOnTimeout` a call that overruns kills the child),
 * `kill()`, and `stop()` (closes its channel, then SIGKILL if it is still there 5 s later).
 */
export const startForked = ({ script, params, name, log, serialization = 'json', killOnTimeout = false }) =>
  new Promise((resolveStart, rejectStart) => {
    const child = fork(script, [JSON.stringify(params)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [], serialization });
    const pending = new Map();
    let nextId = 1;
    let exited = false;
    child.on('exit', (code, signal) => {
      exited = true;
      for (const { reject } of pending.values()) reject(new Error(`${name} exited (code ${code}, signal ${signal})`));
      pending.clear();
      rejectStart(new Error(`${name} exited at start (code ${code}, signal ${signal})`));
    });
    const call = (op, args = {}, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        if (exited) return reject(new Error(`the ${name} is gone`));
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          log(`${name} ${child.pid}: ${op} took more than ${timeoutMs} ms${killOnTimeout ? ', killing it' : ''}`);
          if (killOnTimeout) child.kill('SIGKILL');
          reject(new Error(`${name} ${op} timed out after ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, { resolve, reject, timer });
        child.send({ id, op, args });
      });
    child.on('message', (message) => {
      if (message.ready) {
        resolveStart({
          pid: child.pid,
          call,
          kill: () => !exited && child.kill('SIGKILL'),
          stop: async () => {
            if (exited) return;
            child.disconnect();
            for (let i = 0; i < 50 && !exited; i++) await sleep(100);
            if (!exited) child.kill('SIGKILL');
          },
        });
        return;
      }
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      clearTimeout(waiting.timer);
      if (message.error) waiting.reject(new Error(message.error));
      else waiting.resolve(message.result);
    });
  });
