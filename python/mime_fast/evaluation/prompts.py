"""The prompts of task ``recognize``: one system prompt and one user text per condition, the same
for every subset (what differs between subsets is only the media sent).

- ``direct``: the label alone;
- ``cot``: "think step by step" (HitEmotion's CoT baseline), the answer last as ``{'emotion': 'label'}``;
- ``tom``: HitEmotion's Theory-of-Mind scaffold for multimodal emotion recognition (its Figure 27:
  perceptual simulation, cognitive empathy, perspective-taking, conclude and map to label) with
  MIME's seven categories, ending in ``{'emotion': 'label'}``;
- ``coe``: answer after a Chain-of-Emotion, as MIME's stage IV writes one (scene understanding,
  emotional analysis, predicted emotion) -- but from the clip alone, with no cue or label given --
  as one JSON object whose ``predicted_emotion`` is the answer.

The texts are part of every request's cache key: editing one asks its requests again.
"""

from __future__ import annotations

from ..manifest import EMOTIONS

__all__ = ["CONDITIONS", "render", "render_judge", "render_question"]

CONDITIONS = ("direct", "cot", "tom", "coe")

_LABELS = ", ".join(EMOTIONS)

_SYSTEM = {
    "direct": "You are an expert in multimodal emotion recognition.",
    "cot": "You are an expert in multimodal emotion recognition.",
    "coe": "You are an expert in multimodal emotion recognition who reasons in a Chain of Emotion.",
    "tom": ("You are a multimodal affective computing expert grounded in theory of mind. Your task is to infer "
            "the speaker's current emotional state by reasoning about their mental world from multimodal evidence."),
}

_TASK = {
    "direct": f"Which emotion does the person express? Answer with exactly one word from: {_LABELS}.",
    "cot": (f"Which emotion does the person express? Please think step-by-step, then choose exactly one label "
            f"from: {_LABELS}, and output exactly {{'emotion': 'label'}} on the last line."),
    "coe": ("Reason in a Chain of Emotion: first describe the scene and what the person does (scene understanding), "
            "then analyse the cues of their emotion -- facial expression, voice, posture and gesture, as far as "
            "they can be perceived -- and how they combine (emotional analysis), then name the emotion. Reply "
            'with one JSON object: {"scene_understanding": "...", "emotional_analysis": "...", '
            f'"predicted_emotion": "one of {_LABELS}"}}.'),
    "tom": f"""Complete the multimodal emotion recognition task as follows:

(1) Decode Affective Signals (Perceptual Simulation): Systematically decode observable cues in each available \
channel -- visual behavior (face, gaze, posture, gesture), speech prosody (tone, pitch, intensity, tempo) if \
available -- as outward evidence of an inner state. Briefly note the present cues and their likely emotion \
implications.

(2) Synthesize a Mental State Hypothesis (Cognitive Empathy): Integrate the decoded cues into a coherent \
first-order hypothesis about what the speaker is feeling now. If the cues converge, state that they reinforce the \
same valence. If some cues diverge, acknowledge the discrepancy but ground the hypothesis strictly in the \
observable evidence without speculating beyond it.

(3) Attribute from the Speaker's Perspective (Perspective-Taking): Refine the hypothesis to attribute the single \
most plausible here-and-now emotional state from the speaker's perspective. Exclude interpretations based on the \
viewer's reaction or on the speaker's stable traits.

(4) Conclude and Map to Label: Provide your reasoning following the steps above, then choose exactly one label \
from: {_LABELS}, and output exactly {{'emotion': 'label'}}.""",
}


def _given(transport: str) -> str:
    given = "a video clip" if transport == "video" else "frames sampled evenly from a video clip"
    return f"You are given {given} (and its audio track, where it has one)."


def render_question(question: str, transport: str) -> tuple[str, str]:
    """Task ``pairs``: the (system prompt, user text) of one yes/no question."""
    return (_SYSTEM["direct"].replace("recognition", "understanding"),
            f"{_given(transport)} Answer the question with yes or no only.\nQuestion: {question}")


def render(condition: str, transport: str) -> tuple[str, str]:
    """The (system prompt, user text) of ``condition``; the user text says how the clip is given."""
    if condition not in CONDITIONS:
        raise ValueError(f"unknown prompt condition {condition!r}; expected one of {CONDITIONS}")
    return _SYSTEM[condition], f"{_given(transport)} {_TASK[condition]}"


def render_judge(task: str, reply: str) -> tuple[str, str]:
    """The judge model's (system prompt, user text) for a reply the rules could not read: which
    answer it gives, or none where it refuses, hesitates or gives none."""
    if task == "recognize":
        what, options = f"which of the emotions {_LABELS} a person in a video expresses", f"one of {_LABELS}"
    else:
        what, options = "a yes/no question about a video", "yes or no"
    return ("You read another model's reply and report the final answer it gives, nothing else.",
            f"The reply below answers {what}. Which answer does it give? Reply with exactly {options}, or none "
            f"if it refuses, hesitates between several answers or gives none.\n\nReply:\n{reply}")
