// A reader of text/event-stream (the HTML standard's event stream
// interpretation), for SSE read through fetch: unlike EventSource, fetch
// can send the bearer token in a header and lets the client own reconnects.

/**
 * sseEvents yields the events of a response body: { event, data, id }
 * (id: null when the event had no id field).
 * @param {ReadableStream<Uint8Array>} body
 */
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = blank();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = lineEnd(buf)) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(buf[nl] === '\r' && buf[nl + 1] === '\n' ? nl + 2 : nl + 1);
        if (line === '') {
          if (ev.data !== null) yield { event: ev.event || 'message', data: ev.data, id: ev.id };
          ev = blank();
          continue;
        }
        if (line[0] === ':') continue; // a comment
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        line = colon < 0 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
        if (field === 'data') ev.data = ev.data === null ? line : `${ev.data}\n${line}`;
        else if (field === 'event') ev.event = line;
        else if (field === 'id') ev.id = line;
        // retry: the client keeps its own back-off
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function blank() { return { event: '', data: null, id: null }; }

// lineEnd finds the first line break (\n, \r\n or a lone \r). A \r at the
// very end of the buffer waits for the next chunk: it may be half of \r\n.
function lineEnd(s) {
  const n = s.indexOf('\n');
  const r = s.indexOf('\r');
  if (r < 0 || (n >= 0 && n < r)) return n;
  if (r === s.length - 1) return -1;
  return r;
}
