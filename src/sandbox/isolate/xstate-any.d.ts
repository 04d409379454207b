// The harness reaches into xstate 4's internals (private interpreter members, a bundled copy's
// classes), which its published types do not describe: inside the isolate xstate is untyped.
declare const xstate: any;
export = xstate;
