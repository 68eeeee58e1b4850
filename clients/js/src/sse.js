// A reader of text/event-stream (the HTML standard's event stream
// interpretation), for SSE read through fetch: unlike EventSource, fetch
// can send the bearer token in a header and lets the client own reconnects.

/**
 * sseEvents yields the events of a response body: { event, data, id }
 * (id: null when the event had no id field), in arrays, those each chunk
 * of the body completed: one await per chunk, not per event.
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
      const out = [];
      // Lines are read from pos on rather than cut off the buffer one by
      // one, which would copy it for each; cr is the next \r (-1: none in
      // the buffer, as from the gateway, which ends lines with \n).
      let pos = 0;
      let cr = buf.indexOf('\r');
      for (;;) {
        if (cr >= 0 && cr < pos) cr = buf.indexOf('\r', pos);
        let end = buf.indexOf('\n', pos);
        if (cr >= 0 && (end < 0 || cr < end)) {
          if (cr === buf.length - 1) break; // maybe half of \r\n: the next chunk tells
          end = cr;
        }
        if (end < 0) break;
        let line = buf.slice(pos, end);
        pos = end + (buf[end] === '\r' && buf[end + 1] === '\n' ? 2 : 1);
        if (line === '') {
          if (ev.data !== null) out.push({ event: ev.event || 'message', data: ev.data, id: ev.id });
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
      buf = buf.slice(pos);
      if (out.length) yield out;
    }
  } finally {
    reader.releaseLock();
  }
}

function blank() { return { event: '', data: null, id: null }; }
