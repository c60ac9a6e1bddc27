// The gate's settings from the config's gate section (src/config/core/sections.ts). Pure.
import type { Config } from '../../config/core/schema.js';
import type { GateSettings } from './verdict.js';

export function gateSettingsOf(g: Config['gate']): GateSettings {
  return {
    windowMs: g.window,
    usageWindowMs: g.usageWindow,
    maxErrorRate: g.maxErrorRate,
    maxDecisionLatencyMs: g.maxDecisionLatency,
    minDecisions: g.minDecisions,
  };
}
