"""The live view's two pages: the tiles of a run's slots, and one slot's full-size screen (noVNC).

Both are static text; what changes comes from /api/status and /api/screen/N.png, which the
tiles page polls once a second. Every request carries the token from the page's own URL
(the cookie set with the page covers noVNC's modules).
"""

from __future__ import annotations

import html
import json

POLL_MS = 1000
TILE_W, TILE_H = 320, 200

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;background:#f6f8fa;color:#1b1f24}
h1{font-size:20px;margin:0 0 4px}#tiles{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.tile{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:6px;cursor:pointer;width:%dpx}
.tile canvas{display:block;background:#000;width:%dpx;height:%dpx}.meta{font-size:12px;margin-bottom:4px}
.phase{color:#0969da}.pass{color:#1a7f37}.fail,.timeout,.agent_error{color:#cf222e}
.verifier_error,.infra_error{color:#8250df}.human{color:#9a6700;font-weight:600}
""" % (TILE_W, TILE_W, TILE_H)

_TILES_JS = """
const token = new URLSearchParams(location.search).get('token') || '';
const q = (path, extra = '') => `${path}?token=${encodeURIComponent(token)}${extra}`;
const tiles = new Map();
function tileFor(slot) {
  if (tiles.has(slot)) return tiles.get(slot);
  const div = document.createElement('div');
  div.className = 'tile'; div.dataset.slot = slot;
  div.innerHTML = `<div class="meta"></div><canvas width="%(w)d" height="%(h)d"></canvas>`;
  div.onclick = () => window.open(q(`view/${slot}`), `slot-${slot}`);
  document.getElementById('tiles').appendChild(div);
  tiles.set(slot, div);
  return div;
}
async function draw(slot, canvas) {
  const r = await fetch(q(`api/screen/${slot}.png`, `&t=${Date.now()}`), {cache: 'no-store'});
  if (!r.ok) return;
  const picture = await createImageBitmap(await r.blob());
  canvas.getContext('2d').drawImage(picture, 0, 0, canvas.width, canvas.height);
  canvas.dataset.frames = String(Number(canvas.dataset.frames || 0) + 1);
}
function text(s) { const span = document.createElement('span'); span.textContent = s; return span.innerHTML; }
async function refresh() {
  let status;
  try { status = await (await fetch(q('api/status'), {cache: 'no-store'})).json(); }
  catch (e) { document.getElementById('progress').textContent = 'the run is not answering'; return; }
  document.getElementById('progress').textContent = `${status.done} of ${status.total} episodes done` +
    (status.control ? ' · a click on a tile gives control of its screen' : ' · view only');
  const busy = new Set();
  for (const s of status.slots) {
    busy.add(s.slot);
    const div = tileFor(s.slot);
    div.querySelector('.meta').innerHTML = `slot ${s.slot} · <b>${text(s.task_id)}</b> #${s.trial} · ` +
      `<span class="phase">${text(s.phase)}</span> · ${Math.round(s.elapsed_s)} s`;
    draw(s.slot, div.querySelector('canvas')).catch(() => {});
  }
  for (const [slot, div] of tiles) if (!busy.has(slot)) { div.remove(); tiles.delete(slot); }
  document.getElementById('finished').innerHTML = status.finished.map(f =>
    `<li><a href="${q(f.report.split('#')[0])}#${encodeURIComponent(f.report.split('#')[1])}" target="_blank">` +
    `${text(f.task_id)} #${f.trial}</a>: <span class="${text(f.outcome)}">${text(f.outcome)}</span>` +
    (f.intervened ? ' <span class="human">intervened</span>' : '') + '</li>').join('');
}
refresh(); setInterval(refresh, %(poll)d);
""" % {"w": TILE_W, "h": TILE_H, "poll": POLL_MS}


def tiles_page(title: str, control: bool) -> str:
    e = html.escape
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>cu-run live: {e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>cu-run live: {e(title)}</h1><div id='progress'></div>"
            f"<div id='tiles'></div><h2>Finished</h2><ul id='finished'></ul>"
            f"<script>{_TILES_JS}</script></body></html>")


_VIEW_JS = """
import RFB from '/novnc/core/rfb.js';
const token = new URLSearchParams(location.search).get('token') || '';
const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
const state = document.getElementById('state');
const rfb = new RFB(document.getElementById('screen'),
                    `${scheme}://${location.host}/ws/%(slot)d?token=${encodeURIComponent(token)}`, {shared: true});
rfb.viewOnly = %(view_only)s;
rfb.addEventListener('connect', () => { state.textContent = 'connected'; document.body.dataset.state = 'connected'; });
rfb.addEventListener('disconnect', () => { state.textContent = 'the episode ended or the VM went away';
                                            document.body.dataset.state = 'disconnected'; });
window.rfb = rfb;
"""


def view_page(slot: int, control: bool) -> str:
    mode = ("<b class='human'>control: what you do here is recorded as a human intervention</b>"
            if control else "view only")
    script = _VIEW_JS % {"slot": slot, "view_only": json.dumps(not control)}
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>cu-run live: slot {slot}</title>"
            "<style>body{margin:0;background:#1b1f24;color:#eee;font:13px system-ui,sans-serif}"
            "#bar{padding:4px 8px}.human{color:#f0b72f}#screen{width:100vw;height:calc(100vh - 26px)}</style>"
            f"</head><body data-state='connecting'><div id='bar'>slot {slot} · <span id='state'>connecting</span>"
            f" · {mode}</div><div id='screen'></div><script type='module'>{script}</script></body></html>")
