// The admission routes: one judge per path the API server calls (src/shared/api/webhooks.ts registers them).
import { WEBHOOK_PATHS, type WebhookPath } from '../shared/api/webhooks.js';
import { judgeControllerWrite } from './controller-write/index.js';
import { judgeDecision } from './decision.js';
import type { Judge } from './judge.js';
import { judgeRealm } from './realm.js';
import { judgeStamp } from './stamp.js';
import { judgeStatusWrite } from './status-write.js';

export const ADMISSION_ROUTES: Readonly<Record<WebhookPath, Judge>> = {
  [WEBHOOK_PATHS.stamp]: judgeStamp,
  [WEBHOOK_PATHS.decision]: judgeDecision,
  [WEBHOOK_PATHS.controllerWrite]: judgeControllerWrite,
  [WEBHOOK_PATHS.statusWrite]: judgeStatusWrite,
  [WEBHOOK_PATHS.realm]: judgeRealm,
};
