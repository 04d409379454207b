import ELK, { type ElkExtendedEdge, type ElkNode } from 'elkjs/lib/elk.bundled.js';
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { activeIds, type DefinitionNode, eventLabel, type MachineDefinition } from './definition.js';

/** The layout engine, in the page (the bundled build runs without a web worker). */
const elk = new ELK();

const CHAR_WIDTH = 7.2;
const LABEL_HEIGHT = 16;
const STATE_HEIGHT = 34;

interface Drawn {
  nodes: { id: string; key: string; type: string; x: number; y: number; width: number; height: number; depth: number; tags?: string[] }[];
  initials: { id: string; x: number; y: number }[];
  edges: { id: string; points: { x: number; y: number }[]; label?: { text: string; x: number; y: number } }[];
  width: number;
  height: number;
}

const INITIAL = '\u0000initial:';

/** The ELK graph of a definition: states as nested nodes, a dot for each initial state, transitions as edges. */
const graphOf = (definition: MachineDefinition): ElkNode => {
  const edges: ElkExtendedEdge[] = [];
  const known = new Set<string>();
  const collect = (node: DefinitionNode) => {
    known.add(node.id);
    node.states.forEach(collect);
  };
  collect(definition.root);
  const nodeOf = (node: DefinitionNode): ElkNode => {
    const children = node.states.map(nodeOf);
    if (node.initial !== undefined) {
      const first = node.states.find((s) => s.key === node.initial);
      if (first) {
        children.unshift({ id: INITIAL + node.id, width: 10, height: 10 });
        edges.push({ id: `init:${node.id}`, sources: [INITIAL + node.id], targets: [first.id] });
      }
    }
    node.transitions.forEach((transition, i) => {
      transition.targets.forEach((target, j) => {
        if (!known.has(target)) return;
        const text = eventLabel(transition.event, transition.guarded);
        edges.push({
          id: `t:${node.id}:${i}:${j}`,
          sources: [node.id],
          targets: [target],
          labels: [{ text, width: text.length * CHAR_WIDTH + 6, height: LABEL_HEIGHT }],
        });
      });
    });
    const tagsText = node.tags ? ` ${node.tags.map((tag) => `#${tag}`).join(' ')}` : '';
    const labelWidth = node.key.length * CHAR_WIDTH + tagsText.length * 6.2 + 28;
    if (children.length === 0) return { id: node.id, width: Math.max(60, labelWidth), height: STATE_HEIGHT };
    return {
      id: node.id,
      children,
      layoutOptions: { 'elk.padding': '[top=30,left=14,bottom=14,right=14]', 'elk.nodeSize.minimum': `(${labelWidth},40)` },
    };
  };
  const root = nodeOf(definition.root);
  return {
    ...root,
    edges,
    layoutOptions: {
      ...root.layoutOptions,
      'elk.algorithm': 'layered',
      'elk.direction': 'RIGHT',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.layered.spacing.nodeNodeBetweenLayers': '40',
      'elk.spacing.nodeNode': '24',
      'elk.spacing.edgeLabel': '4',
      'elk.edgeLabels.inline': 'false',
      'elk.json.shapeCoords': 'ROOT',
      'elk.json.edgeCoords': 'ROOT',
      'elk.nodeSize.constraints': 'MINIMUM_SIZE',
    },
  };
};

const drawnOf = (laid: ElkNode, definition: MachineDefinition): Drawn => {
  const byId = new Map<string, DefinitionNode>();
  const index = (node: DefinitionNode) => {
    byId.set(node.id, node);
    node.states.forEach(index);
  };
  index(definition.root);
  const drawn: Drawn = { nodes: [], initials: [], edges: [], width: laid.width ?? 0, height: laid.height ?? 0 };
  const visit = (node: ElkNode, depth: number) => {
    const x = node.x ?? 0;
    const y = node.y ?? 0;
    if (node.id.startsWith(INITIAL)) drawn.initials.push({ id: node.id, x: x + 5, y: y + 5 });
    else {
      const state = byId.get(node.id);
      if (state) {
        drawn.nodes.push({
          id: node.id,
          key: state.key,
          type: state.type,
          x,
          y,
          width: node.width ?? 0,
          height: node.height ?? 0,
          depth,
          ...(state.tags ? { tags: state.tags } : {}),
        });
      }
    }
    for (const child of node.children ?? []) visit(child, depth + 1);
    for (const edge of node.edges ?? []) {
      const section = edge.sections?.[0];
      if (!section) continue;
      const label = edge.labels?.[0];
      drawn.edges.push({
        id: edge.id,
        points: [section.startPoint, ...(section.bendPoints ?? []), section.endPoint],
        ...(label?.text ? { label: { text: label.text, x: label.x ?? 0, y: label.y ?? 0 } } : {}),
      });
    }
  };
  visit(laid, 0);
  return drawn;
};

/** The statechart of a version, laid out by ELK, with the states of `value` highlighted. */
export const Statechart = ({ definition, value }: { definition: MachineDefinition; value: unknown }) => {
  const [drawn, setDrawn] = useState<Drawn | undefined>(undefined);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  useEffect(() => {
    let current = true;
    elk
      .layout(graphOf(definition))
      .then((laid) => current && setDrawn(drawnOf(laid, definition)))
      .catch((error: unknown) => current && setProblem(`the statechart could not be laid out: ${String(error)}`));
    return () => {
      current = false;
    };
  }, [definition]);
  if (problem) return html`<p class="error">${problem}</p>`;
  if (!drawn) return html`<p class="muted">Laying out the statechart…</p>`;
  const active = activeIds(definition.root, value);
  const margin = 8;
  return html`<div class="chart-scroll">
    <svg
      class="statechart"
      role="img"
      aria-label="statechart of the machine with the active states highlighted"
      width=${drawn.width + margin * 2}
      height=${drawn.height + margin * 2}
      viewBox=${`${-margin} ${-margin} ${drawn.width + margin * 2} ${drawn.height + margin * 2}`}
    >
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead" />
        </marker>
      </defs>
      ${drawn.nodes.map(
        (node) =>
          html`<g
            key=${node.id}
            class=${`state ${node.type} ${active.has(node.id) ? 'active' : ''} ${node.depth === 0 ? 'root' : ''}`}
            data-state-id=${node.id}
            data-active=${active.has(node.id) ? 'true' : 'false'}
          >
            <rect x=${node.x} y=${node.y} width=${node.width} height=${node.height} rx="8" />
            ${
              node.type === 'final'
                ? html`<rect class="inner" x=${node.x + 3} y=${node.y + 3} width=${node.width - 6} height=${node.height - 6} rx="6" />`
                : null
            }
            <text x=${node.x + 10} y=${node.y + (node.height <= STATE_HEIGHT ? node.height / 2 + 4 : 19)}>
              ${node.key}${node.tags ? html`<tspan class="tags"> ${node.tags.map((tag) => `#${tag}`).join(' ')}</tspan>` : null}
            </text>
          </g>`,
      )}
      ${drawn.edges.map(
        (edge) =>
          html`<g key=${edge.id} class="transition">
            <polyline points=${edge.points.map((p) => `${p.x},${p.y}`).join(' ')} marker-end="url(#arrow)" />
            ${edge.label ? html`<text x=${edge.label.x + 3} y=${edge.label.y + 12}>${edge.label.text}</text>` : null}
          </g>`,
      )}
      ${drawn.initials.map((dot) => html`<circle key=${dot.id} class="initial" cx=${dot.x} cy=${dot.y} r="5" />`)}
    </svg>
  </div>`;
};
