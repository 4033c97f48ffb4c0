// Turning scheduler values into short readable text.

const numberFormat = new Intl.NumberFormat('en');

/** 12345 -> "12,345"; anything not a number -> "–". */
export function count(value) {
  return typeof value === 'number' && Number.isFinite(value) ? numberFormat.format(value) : '–';
}

/** 1 -> "1 record", 1234 -> "1,234 records" (the plural is the noun plus "s" unless given). */
export function counted(value, noun, nouns = `${noun}s`) {
  return `${count(value)} ${value === 1 ? noun : nouns}`;
}

/** Seconds -> "4 s", "3 min 20 s", "2 h 05 min", "3 d 4 h". */
export function duration(seconds) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '–';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/** Epoch seconds -> local "2024-05-01 13:04:05". */
export function timestamp(epochSeconds) {
  if (typeof epochSeconds !== 'number' || !Number.isFinite(epochSeconds)) return '–';
  const d = new Date(epochSeconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const zoneFormats = new Map(); // IANA zone -> its Intl.DateTimeFormat (building one is slow)

function zoneFormat(timeZone) {
  if (!zoneFormats.has(timeZone)) {
    zoneFormats.set(timeZone, new Intl.DateTimeFormat('en-GB', {
      timeZone, hourCycle: 'h23', timeZoneName: 'short',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    }));
  }
  return zoneFormats.get(timeZone);
}

/**
 * Epoch seconds -> "2024-05-01 06:00:00 CEST" in the IANA zone ``timeZone`` (a schedule's, so its times
 * read as its cron does), with the zone's short name so no one takes it for their own local time.
 */
export function zonedTimestamp(epochSeconds, timeZone) {
  if (typeof epochSeconds !== 'number' || !Number.isFinite(epochSeconds)) return '–';
  let parts;
  try {
    parts = zoneFormat(timeZone).formatToParts(new Date(epochSeconds * 1000));
  } catch (unknownZone) { // a zone this browser does not know: its own local time, named as such
    return `${timestamp(epochSeconds)} (your local time)`;
  }
  const part = Object.fromEntries(parts.map((p) => [p.type, p.value]));
  return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}:${part.second} ${part.timeZoneName}`;
}

/** Epoch seconds -> "12 s ago" relative to now (seconds). */
export function ago(epochSeconds, now = Date.now() / 1000) {
  if (typeof epochSeconds !== 'number' || !Number.isFinite(epochSeconds)) return '–';
  return `${duration(now - epochSeconds)} ago`;
}

/** Any JSON value as display text (objects as compact JSON). */
export function text(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/**
 * A task's error as readable text. Workers send the explanation JSON-encoded (Luigi's wire format), so a
 * string that is a JSON text is shown decoded: a traceback with its line breaks, other values indented.
 */
export function errorText(value) {
  if (typeof value !== 'string') return text(value);
  let decoded;
  try {
    decoded = JSON.parse(value);
  } catch (notJson) {
    return value;
  }
  if (decoded === null) return ''; // a run that ended well reports a null explanation: nothing to show
  return typeof decoded === 'string' ? decoded : JSON.stringify(decoded, null, 2);
}

/** "k=v, k=v" over a params object, in key order (what the scheduler's display names use). */
export function paramsText(params) {
  if (!params || typeof params !== 'object') return '';
  return Object.keys(params).sort().map((k) => `${k}=${text(params[k])}`).join(', ');
}

/** Family(k=v, ...) for a serialized task (graph nodes other than the root carry no display_name). */
export function displayName(task, taskId = '') {
  if (task && typeof task.display_name === 'string') return task.display_name;
  if (task && task.name) return `${task.name}(${paramsText(task.params)})`;
  return taskId;
}

/** Shorten long text for labels: "abcdef…". */
export function ellipsis(value, max) {
  const s = String(value);
  return s.length > max ? `${s.slice(0, Math.max(1, max - 1))}…` : s;
}

/** A resources object as "cpu: 2, mem: 4". */
export function resourcesText(resources) {
  if (!resources || typeof resources !== 'object') return '';
  return Object.keys(resources).sort().map((k) => `${k}: ${text(resources[k])}`).join(', ');
}

/** "Worker(salt=1, workers=4, host=etl-01, username=ana, pid=42)" -> "etl-01 · pid 42" (ids are long). */
export function workerLabel(workerId) {
  if (typeof workerId !== 'string' || !workerId) return '';
  const host = /host=([^,)]+)/.exec(workerId);
  const pid = /pid=(\d+)/.exec(workerId);
  if (!host) return workerId;
  return pid ? `${host[1]} · pid ${pid[1]}` : host[1];
}
