import type { LoadedPrompt, PromptFact } from './prompts.js';
import type { SkillFact } from './skills.js';

/**
 * The text of a turn's first message. Domain prompts and skill facts go only into the first turn
 * of a new thread (no threadId); a resume turn carries the user's prompt alone, because history
 * comes only from the backend's native thread resume (spec/3, "Prompt and skill assembly").
 */
export interface TurnPromptInput {
  userPrompt: string;
  /** The thread being resumed; null or absent for a new thread. */
  threadId?: string | null | undefined;
  /** Loaded prompts in promptRefs order (from `assembleRuntime().prompts`). */
  prompts: readonly LoadedPrompt[];
  skills: readonly SkillFact[];
  /** Assembly-time prompt facts; returned with `injected` set for this turn. */
  promptFacts?: readonly PromptFact[];
}

export interface TurnPrompt {
  text: string;
  initialPromptInjected: boolean;
  injectedPromptNames: string[];
  injectedSkillNames: string[];
  /** `promptFacts` with `injected` true for the prompts this turn carried. */
  promptFacts: PromptFact[];
}

const MAX_SKILL_LINES = 64;
const MAX_SKILLS_SECTION = 16 * 1024;

export function composeTurnPrompt(input: TurnPromptInput): TurnPrompt {
  const newThread =
    input.threadId === undefined || input.threadId === null || input.threadId === '';
  const facts = (input.promptFacts ?? []).map((f) => ({ ...f, injected: false }));
  // A resumed thread already holds the instructions; a new one with none to give gets none.
  const plain: TurnPrompt = {
    text: input.userPrompt,
    initialPromptInjected: false,
    injectedPromptNames: [],
    injectedSkillNames: [],
    promptFacts: facts,
  };
  if (!newThread) return plain;
  const sections: string[] = [];
  const injectedPromptNames = input.prompts.map((p) => p.name);
  if (input.prompts.length > 0) {
    const blocks = input.prompts.map((p, i) => {
      const label = `${i + 1}/${input.prompts.length} "${p.name}" (${p.path}, sha256 ${p.sha256.slice(0, 12)}, ${p.bytes} bytes)`;
      const body = p.text.endsWith('\n') ? p.text : `${p.text}\n`;
      return `----- BEGIN DOMAIN PROMPT ${label} -----\n${body}----- END DOMAIN PROMPT ${i + 1}/${input.prompts.length} "${p.name}" -----`;
    });
    sections.push(`# Domain instructions\n\n${blocks.join('\n\n')}`);
  }
  const skillLines = skillSection(input.skills);
  if (skillLines.lines.length > 0) {
    sections.push(
      `# Skills available in .agents/skills (read a skill's SKILL.md before using it)\n\n${skillLines.lines.join('\n')}`,
    );
  }
  if (sections.length === 0) return plain;
  const user = input.userPrompt.endsWith('\n') ? input.userPrompt : `${input.userPrompt}\n`;
  sections.push(
    `# User request\n\n----- BEGIN USER PROMPT -----\n${user}----- END USER PROMPT -----`,
  );
  const names = new Set(injectedPromptNames);
  return {
    text: `${sections.join('\n\n')}\n`,
    initialPromptInjected: true,
    injectedPromptNames,
    injectedSkillNames: skillLines.names,
    promptFacts: facts.map((f) => ({ ...f, injected: f.status === 'loaded' && names.has(f.name) })),
  };
}

/** One bounded line per skill: name, manifest path, hash, bytes, source and summary. */
function skillSection(skills: readonly SkillFact[]): { lines: string[]; names: string[] } {
  const lines: string[] = [];
  const names: string[] = [];
  let size = 0;
  for (const skill of skills) {
    const line = `- ${skill.name}: ${skill.manifestPath}, sha256 ${skill.sha256.slice(0, 12)}, ${skill.bytes} bytes, ${skill.fileCount} files, source ${skill.sourceBundle}${skill.summary ? ` — ${skill.summary}` : ''}`;
    if (lines.length >= MAX_SKILL_LINES || size + line.length > MAX_SKILLS_SECTION) {
      lines.push(`- … ${skills.length - lines.length} more skills in .agents/skills`);
      break;
    }
    lines.push(line);
    names.push(skill.name);
    size += line.length + 1;
  }
  return { lines, names };
}
