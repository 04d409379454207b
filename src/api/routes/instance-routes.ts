import { requireDeletionConfirmation } from '../../domain/confirmation.js';
import { decodeCursor, decodeStringCursor } from '../../domain/cursor.js';
import { conflict, invalidParameter, InstanceNotFoundError, notFound } from '../../domain/errors.js';
import { limits } from '../../domain/limits.js';
import type { JsonObject, MachineEvent } from '../../domain/machine-state.js';
import { isPrettyId } from '../../domain/ids.js';
import { clipped, isSlug, requireSlug } from '../../domain/names.js';
import { clientEventProblem } from '../../domain/reserved-events.js';
import { type ApiContext, callerInOrg, requireMachine, requireVersionParameter } from '../api-context.js';
import { json, jsonBody, noContent } from '../http-types.js';
import { pageOf } from '../pagination.js';
import type { Router } from '../router.js';
import { stateView, versionInfo } from '../state-view.js';
import type { TransitionRecord } from '../../store/instance-store.js';

/** Machine instances (wire-protocol §3.4). Writes go to the owner; lists and history are read from the owners. */
export const registerInstanceRoutes = (router: Router, context: ApiContext): void => {
  const { versions, reads, runtime, writes } = context;

  /** The instance's head as committed, with every commit acknowledged before this request (through any node) in. */
  const instanceOf = async (orgId: string, machine: string, name: string) => {
    const head = await reads.head(orgId, machine, name);
    if (!head) throw new InstanceNotFoundError(machine, name);
    return head;
  };

  router.add(
    'POST',
    '/machines/:machine',
    async (request) => {
      const { caller, orgId } = callerInOrg(context, request, 'instances.write');
      const machine = requireMachine(context, orgId, request.params.machine as string);
      const body = jsonBody(request);
      const name = requireSlug(body.slug, 'slug');
      const initial = body.context ?? {};
      if (typeof initial !== 'object' || initial === null || Array.isArray(initial))
        throw invalidParameter('context', 'context must be a JSON object');
      let versionId: string;
      if (body.machineVersionId !== undefined && body.machineVersionId !== null) {
        if (typeof body.machineVersionId !== 'string')
          throw invalidParameter('machineVersionId', 'machineVersionId must be a string (a ver_ id)');
        if (!isPrettyId(body.machineVersionId, 'ver') || !versions.getVersion(orgId, machine.slug, body.machineVersionId)) {
          throw notFound(`machine ${machine.slug} has no version ${clipped(body.machineVersionId)}`);
        }
        versionId = body.machineVersionId;
      } else if (machine.currentVersionId) {
        versionId = machine.currentVersionId;
      } else {
        throw conflict(`machine ${machine.slug} has no current version: finalize a version first (the first one becomes current)`);
      }
      const head = await writes.create({
        orgId,
        machine: machine.slug,
        name,
        versionId,
        context: initial as JsonObject,
        authContext: caller.authContext,
      });
      return json(stateView(head));
    },
    // (what machine code is handed at most: refused before it is read, limits.ts)
    { maxBodyBytes: limits.maxEventBodyBytes },
  );

  // `prefix` (not in the State Backed API; the web console's search): only names that start with it.
  router.add('GET', '/machines/:machine/i', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.read');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const prefix = request.query.get('prefix') ?? '';
    if (prefix !== '' && !isSlug(prefix))
      throw invalidParameter('prefix', 'prefix must be the start of an instance name: letters, digits, _ and -');
    const after = decodeStringCursor(request.query.get('cursor')) ?? (prefix === '' ? undefined : justBefore(prefix));
    const pageSize = context.settings.pageSize;
    const listed = await reads.listInstances(orgId, machine.slug, after, pageSize + 1);
    // Names are listed in order: those with the prefix come together, and the first without ends them.
    const end = listed.findIndex((head) => !head.name.startsWith(prefix));
    const found = end === -1 ? listed : listed.slice(0, end);
    const { items, cursor } = pageOf(found, pageSize, (last) => last.name);
    return json({
      instances: items.map((head) => ({
        slug: head.name,
        createdAt: head.createdAt,
        status: head.status,
        machineVersion: versionInfo(head.versionId, versions.getVersion(orgId, machine.slug, head.versionId)),
      })),
      cursor,
    });
  });

  router.add('GET', '/machines/:machine/i/:instance', async (request) => {
    const { caller, orgId } = callerInOrg(context, request, 'state.read');
    const head = await writes.read(orgId, request.params.machine as string, request.params.instance as string, caller.authContext);
    return json(stateView(head));
  });

  router.add(
    'POST',
    '/machines/:machine/i/:instance/events',
    async (request) => {
      const { caller, orgId } = callerInOrg(context, request, 'instances.write', 'events.write');
      const event = eventOf(jsonBody(request).event);
      const head = await writes.send(orgId, request.params.machine as string, request.params.instance as string, event, caller.authContext);
      return json(stateView(head));
    },
    // (what machine code is handed at most: refused before it is read, limits.ts)
    { maxBodyBytes: limits.maxEventBodyBytes },
  );

  router.add('GET', '/machines/:machine/i/:instance/events', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.admin');
    const { machine, instance } = request.params as { machine: string; instance: string };
    await instanceOf(orgId, machine, instance);
    const after = decodeCursor(request.query.get('cursor')) ?? 0;
    if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0)
      throw invalidParameter('cursor', 'cursor is not one this service returned');
    const pageSize = context.settings.pageSize;
    const shown = (record: TransitionRecord) => ({ createdAt: record.createdAt, state: record.state, event: record.event });
    const { items, cursor } = pageOf(
      await reads.listTransitions(orgId, machine, instance, after, pageSize + 1),
      pageSize,
      (last) => last.seq,
      { max: MAX_HISTORY_PAGE_BYTES, of: (record) => Buffer.byteLength(JSON.stringify(shown(record))) },
    );
    return json({ transitions: items.map(shown), cursor });
  });

  router.add('GET', '/machines/:machine/i/:instance/admin', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.admin');
    const { machine, instance } = request.params as { machine: string; instance: string };
    const head = await instanceOf(orgId, machine, instance);
    runtime.countRead(orgId, machine);
    return json({
      state: head.state,
      context: head.context,
      status: head.status,
      tags: head.tags,
      done: head.done,
      machineVersion: versionInfo(head.versionId, versions.getVersion(orgId, machine, head.versionId)),
      ...(head.targetVersionId === undefined
        ? {}
        : { desiredMachineVersion: versionInfo(head.targetVersionId, versions.getVersion(orgId, machine, head.targetVersionId)) }),
      createdAt: head.createdAt,
    });
  });

  /** The desired version (wire-protocol §3.4, §8.5): recorded now, the upgrade itself happens on a later event. */
  router.add('PUT', '/machines/:machine/i/:instance/v', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.write');
    const machine = requireMachine(context, orgId, request.params.machine as string);
    const instance = request.params.instance as string;
    const target = requireVersionParameter(context, orgId, machine, jsonBody(request).targetMachineVersionId, 'targetMachineVersionId');
    await instanceOf(orgId, machine.slug, instance);
    await writes.setTargetVersion(orgId, machine.slug, instance, target);
    return noContent(201);
  });

  router.add('PUT', '/machines/:machine/i/:instance/status', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.admin');
    const { machine, instance } = request.params as { machine: string; instance: string };
    const status = jsonBody(request).status;
    if (status !== 'running' && status !== 'paused') throw invalidParameter('status', 'status must be "running" or "paused"');
    await instanceOf(orgId, machine, instance);
    await writes.setStatus(orgId, machine, instance, status);
    return noContent(204);
  });

  router.add('DELETE', '/machines/:machine/i/:instance', async (request) => {
    const { orgId } = callerInOrg(context, request, 'instances.admin');
    const { machine, instance } = request.params as { machine: string; instance: string };
    requireDeletionConfirmation(jsonBody(request), machine, instance, 'hmacSha256OfMachineInstanceNameWithMachineNameKey', 'instance');
    if (!(await writes.delete(orgId, machine, instance))) throw new InstanceNotFoundError(machine, instance);
    return noContent(204);
  });
};

/** A bare string means `{type: string}` (wire-protocol §3.4). */
const eventOf = (raw: unknown): MachineEvent => {
  const event = typeof raw === 'string' ? { type: raw } : raw;
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw invalidParameter('event', 'event must be a string or an object with a string type');
  }
  const type = (event as { type?: unknown }).type;
  if (typeof type !== 'string' || type === '') throw invalidParameter('event', 'event must be a string or an object with a string type');
  const problem = clientEventProblem(event as MachineEvent);
  if (problem !== undefined) throw invalidParameter('event', problem);
  return event as MachineEvent;
};

/**
 * A position just before every name that starts with `prefix` and after every smaller name (lists
 * start after their position): the prefix with its last character one lower, then '~', which sorts
 * after every character a name may hold.
 */
const justBefore = (prefix: string): string => prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) - 1) + '~';

/** A history page ends before the record that takes its JSON past this (at least one record in it): a page of large events. */
const MAX_HISTORY_PAGE_BYTES = 4 * 1024 * 1024;
