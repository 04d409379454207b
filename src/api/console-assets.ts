import { readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { ApiResponse } from './http-types.js';

/** Content types of the files the console's build writes (console/build.mjs). */
const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/**
 * The page may load only its own files and call only its own node (the API and `/rt`): no CDN, no
 * other origin, and nothing may frame it (it handles credentials).
 */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

interface Asset {
  contentType: string;
  data: Buffer;
}

/**
 * The web console's static files (dist/console, built by `make build`), read once into memory on
 * first use: a request names a file by its one path segment and gets it from that map only, so no
 * path a request gives ever reaches the file system (no traversal). The build names scripts and
 * styles by their content's hash: they are cached for good; index.html, which names them, is not.
 */
export class ConsoleAssets {
  private files: Map<string, Asset> | undefined;

  constructor(private readonly dir: URL = new URL('../console/', import.meta.url)) {}

  /** The answer for `/console/<name>`; '' or a name without an extension is the app itself. */
  answer(name: string): ApiResponse | undefined {
    const files = this.load();
    const file = name === '' || !name.includes('.') ? 'index.html' : name;
    const asset = files.get(file);
    if (!asset) return undefined;
    const caching = file === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable';
    return {
      status: 200,
      headers: { ...SECURITY_HEADERS, 'cache-control': caching },
      raw: { contentType: asset.contentType, data: asset.data },
    };
  }

  /** False when the console was not built (dist/console has no index.html). */
  get built(): boolean {
    return this.load().has('index.html');
  }

  private load(): Map<string, Asset> {
    if (this.files) return this.files;
    const files = new Map<string, Asset>();
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      // not built: every answer is a 404 saying so
    }
    for (const name of names) {
      const contentType = CONTENT_TYPES[extname(name)];
      if (contentType) files.set(name, { contentType, data: readFileSync(new URL(name, this.dir)) });
    }
    this.files = files;
    return files;
  }
}
