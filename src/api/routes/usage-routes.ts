import { invalidParameter } from '../../domain/errors.js';
import { usageMonth } from '../../store/instance-store.js';
import { type ApiContext, callerInOrg } from '../api-context.js';
import { json } from '../http-types.js';
import type { Router } from '../router.js';

const DEFAULT_MONTHS = 12;
const MAX_MONTHS = 120;

/**
 * GET /usage (scope `org.read`): the org's transitions and reads for the current month and earlier
 * ones, newest first, each with its machines' shares, counted as wire-protocol §8.6 says, and the
 * org's monthly limits. Not in the State Backed API (it has no usage endpoint).
 */
export const registerUsageRoutes = (router: Router, context: ApiContext): void => {
  router.add('GET', '/usage', async (request) => {
    const { orgId } = callerInOrg(context, request, 'org.read');
    const wanted = request.query.get('months');
    const months = wanted === null ? DEFAULT_MONTHS : Number(wanted);
    if (!Number.isInteger(months) || months < 1 || months > MAX_MONTHS) {
      throw invalidParameter('months', `months must be an integer from 1 to ${MAX_MONTHS}`);
    }
    const current = usageMonth(Date.now());
    const found = await context.runtime.usageMonths(orgId, months);
    // The current month is always shown, with zeros when nothing was counted yet.
    const usage =
      found[0]?.month === current ? found : [{ month: current, transitions: 0, reads: 0, machines: [] }, ...found].slice(0, months);
    return json({
      currentMonth: current,
      usage,
      limits: { monthlyEventsLimit: context.settings.monthlyEventsLimit, monthlyReadsLimit: context.settings.monthlyReadsLimit },
    });
  });
};
