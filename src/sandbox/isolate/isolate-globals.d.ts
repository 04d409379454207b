// What the isolate has beyond ES2022 (installed by globals.js, encoding.js, structured-clone.js,
// url.js, fetch.js, subtle.js before any other code runs), as far as the sandbox's own code uses it.
declare var TextEncoder: any;
declare var TextDecoder: any;
declare var URL: any;
declare var URLSearchParams: any;
declare var AbortController: any;
declare var AbortSignal: any;
declare function atob(data: string): string;
declare function btoa(data: string): string;
