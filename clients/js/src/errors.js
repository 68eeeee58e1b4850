// Errors a StreamClient reports. One class, told apart by `code` (the
// gateway's error code, see openapi.yaml's Error schema) and `status`
// (the HTTP status, or 0 when there was no HTTP answer).

/** Codes after which reading on from the same cursor cannot succeed. */
const CANNOT_CONTINUE = new Set(['resume_impossible', 'tables_dropped', 'subscriber_scope_mismatch']);

export class StreamError extends Error {
  /**
   * @param {number} status HTTP status, 0 for a network or protocol failure
   * @param {string} code the gateway's error code, or a client one (network, protocol, config)
   * @param {string} message
   * @param {{ retryAfter?: number, cause?: unknown }} [more]
   */
  constructor(status, code, message, more = {}) {
    super(message, more.cause === undefined ? undefined : { cause: more.cause });
    this.name = 'StreamError';
    this.status = status;
    this.code = code;
    /** Milliseconds the gateway asked to wait (Retry-After), if it did. */
    this.retryAfter = more.retryAfter || 0;
  }

  /**
   * retryable tells whether trying again later can succeed: network
   * failures, 5xx, 429. A 4xx other than those is the client's to fix.
   */
  get retryable() {
    return this.status === 0 ? this.code === 'network' : this.status >= 500 || this.status === 429 || this.status === 408;
  }

  /** cannotContinue: the stream cannot go on from this cursor (409). */
  get cannotContinue() { return CANNOT_CONTINUE.has(this.code); }
}

/** httpError reads a gateway error response into a StreamError. */
export async function httpError(r) {
  let body = null;
  try { body = await r.json(); } catch { /* not JSON: a proxy's page */ }
  const e = (body && body.error) || {};
  const ra = Number(r.headers.get('Retry-After'));
  return new StreamError(r.status, e.code || `http_${r.status}`, e.message || `HTTP ${r.status} ${r.statusText || ''}`.trim(),
    { retryAfter: Number.isFinite(ra) && ra > 0 ? ra * 1000 : 0 });
}

export const networkError = (cause) => new StreamError(0, 'network', `cannot reach the gateway: ${cause && cause.message ? cause.message : cause}`, { cause });
export const protocolError = (msg, cause) => new StreamError(0, 'protocol', msg, { cause });
export const configError = (msg) => new StreamError(0, 'config', msg);
