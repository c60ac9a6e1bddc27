// `skewgate history`: what changed lately in the running gateway's view (its admin endpoint, GET
// /v1/history): apiservers joining and leaving, readiness, draining, versions, views, cordons and the skew,
// oldest first. Exit 0 with an answer; 1 when the gateway does not answer; 2 bad usage or config.
import { EXIT_BAD_CONFIG, EXIT_OK } from '../constants.js';
import type { HistoryEvent } from '../history/core/transitions.js';
import type { HistoryAnswer } from '../history/recorder.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import { fromGatewayOrDiscovery, type GatewaySource } from './one-shot.js';
import { renderListing, sayAside, type Listing, type ListOptions } from './listing.js';

export async function runHistory(source: GatewaySource, list: ListOptions = { format: 'table' }): Promise<number> {
  if (source.discover) {
    process.stderr.write('skewgate history: --discover does not apply: the history is what the running gateway saw happen\n');
    return EXIT_BAD_CONFIG;
  }
  const got = await fromGatewayOrDiscovery<HistoryAnswer>('history', source, {
    ask: (gateway) => gateway(ADMIN_PATHS.history),
    discover: () => {
      throw new Error('unreachable: history never discovers');
    },
  });
  if (typeof got === 'number') return got;
  const h = got.answer;
  sayAside(list, h.dropped > 0 ? [`(the ${h.dropped} oldest events are no longer kept: the last ${h.capacity} are)`] : []);
  process.stdout.write(renderListing(historyListing(h), list));
  return EXIT_OK;
}

/** The events as rows, oldest first; -o name: apiserver/event (- for the gateway's own, the skew). */
export function historyListing(h: HistoryAnswer): Listing<HistoryEvent> {
  const apiserver = (e: HistoryEvent): string => ('apiserver' in e ? e.apiserver : '-');
  return {
    data: h,
    rows: h.events,
    name: (e) => `${apiserver(e)}/${e.kind}`,
    columns: [
      { header: 'TIME', cell: (e) => e.at },
      { header: 'APISERVER', cell: apiserver },
      { header: 'EVENT', cell: (e) => e.kind },
      { header: 'DETAIL', cell: detail },
    ],
  };
}

function detail(e: HistoryEvent): string {
  switch (e.kind) {
    case 'member_added':
      return e.url;
    case 'not_ready':
      return e.error ?? '';
    case 'version':
      return e.from === null ? e.to : `${e.from} → ${e.to}`;
    case 'skew': {
      const named = [...e.newlySkewed.map((r) => `+${r}`), ...e.noLongerSkewed.map((r) => `-${r}`)];
      return `${e.before} → ${e.after} skewed resources${named.length > 0 ? `: ${named.join('; ')}` : ''}`;
    }
    case 'cordoned':
    case 'uncordoned':
      return `${e.mode} by ${e.by || '?'}${e.reason === '' ? '' : `: ${e.reason}`}`;
    default:
      return '';
  }
}
