"""The prompts of the UDCG paper (Trappolini et al., arXiv 2510.21440), verbatim, each
with a version id that is part of every cache key: changing a prompt's text must change
its version, so that no cached answer to an older prompt is ever reused.

- :data:`UTILITY_SYSTEM` (Figure 4): the system prompt under which the probability of
  ``NO-RESPONSE`` is read (and answers are generated); the user message is
  :func:`utility_user_message`, as in the reference implementation.
- :data:`RELEVANCE_TEMPLATE` (Figure 5): LLM-as-judge passage relevance, JSON answer
  with ``grade`` A (RELEVANT) or B (IRRELEVANT).
- :data:`GRADE_TEMPLATE` (Figure 6): answer grading, JSON answer with ``grade``
  A (CORRECT), B (INCORRECT) or C (ABSTAINED).

UMBRELA's (Upadhyay et al., "UMBRELA: UMbrela is the (Open-Source Reproduction of the)
Bing RELevance Assessor", arXiv 2406.06519; the prompt of Thomas et al., "Large language
models can accurately predict searcher preferences", SIGIR 2024), verbatim from the
authors' repository (castorini/umbrela, ``prompts/qrel_zeroshot_bing.txt``):

- :data:`UMBRELA_TEMPLATE`: reference-free graded relevance of a passage to a query on
  the TREC scale 0-3, answer ``##final score: N``.

And slotwise's own three: a question a passage answers (for ``slotwise synthesize``), and
two for context recall (the course module's "split the reference
answer into claims, ask an LLM judge whether the retrieved context supports each"):

- :data:`CLAIMS_TEMPLATE`: split a reference answer into atomic claims, JSON answer
  ``{"claims": [...]}``.
- :data:`SUPPORT_TEMPLATE`: does a passage support a claim, JSON answer with ``grade``
  A (SUPPORTED) or B (NOT SUPPORTED), in the form of Figure 5's.
- :data:`QUESTION_TEMPLATE`: one question that a passage answers, JSON answer
  ``{"question": ...}``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "CLAIMS_TEMPLATE",
    "CLAIMS_VERSION",
    "GRADE_TEMPLATE",
    "GRADE_VERSION",
    "NO_RESPONSE",
    "QUESTION_TEMPLATE",
    "QUESTION_VERSION",
    "RELEVANCE_TEMPLATE",
    "RELEVANCE_VERSION",
    "SUPPORT_TEMPLATE",
    "SUPPORT_VERSION",
    "UMBRELA_TEMPLATE",
    "UMBRELA_VERSION",
    "UTILITY_SYSTEM",
    "UTILITY_VERSION",
    "claims_prompt",
    "grade_prompt",
    "question_prompt",
    "relevance_prompt",
    "support_prompt",
    "umbrela_prompt",
    "utility_messages",
    "utility_user_message",
]

#: The abstention answer the Figure 4 prompt asks for.
NO_RESPONSE = "NO-RESPONSE"

UTILITY_VERSION = "udcg-fig4-v1"
UTILITY_SYSTEM = (
    "You are given a question and you must respond based on the provided documents. "
    "Respond directly without providing any premise or explanation. If none of the "
    "documents contain the answer, please respond with NO-RESPONSE. Do not try to respond "
    "based on your own knowledge."
)

RELEVANCE_VERSION = "udcg-fig5-v1"
RELEVANCE_TEMPLATE = """Determine if a document is RELEVANT or IRRELEVANT for answering a question. A document is RELEVANT if it contains information that directly supports at least one acceptable answer.

RELEVANT examples:

- Q: "where does the story the great gatsby take place" | Answers: ['Long Island of 1922']
Doc: "The Great Gatsby...follows characters living in West Egg on Long Island in summer of 1922"
→ Contains the exact answer
- Q: "when did korn's follow the leader come out" | Answers: ['August 18, 1998', 'Summer 1998']
Doc: "Follow the Leader...was released on August 18, 1998"
→ Contains the exact release date

IRRELEVANT examples:

- Q: "where does the story the great gatsby take place" | Answers: ['Long Island of 1922']
Doc: "While Long Island features prominently in American literature, the socioeconomic dynamics..."
→ Mentions Long Island but not as the story's setting
- Q: "who played bobby byrd in get on up" | Answers: ['Nelsan Ellis']
Doc: "Critics praised the casting of Bobby Byrd and the chemistry between the main characters..."
→ Discusses casting but doesn't name the specific actor

Evaluation steps:

1. Find the specific information needed to match an acceptable answer. Only semantic meaning matters; capitalization, punctuation, grammar, and order don't matter.
2. Check if the document contains this information directly or through clear inference
3. Check for these common errors:
  - The document contains similar keywords/themes but not the actual answer
  - The document contains partial information that would need to be combined with external knowledge
  - The document discusses related topics but doesn't specifically answer the question

Here is a new example. Don't apologize or correct yourself if there was a mistake; we are just trying to evaluate the relevance of the document.

```
Question: {question}
Acceptable answers list: {answers}
Document: {document}
```

Evaluate the document for this new question as one of:

A: RELEVANT
B: IRRELEVANT

Return a JSON object with the following format:

```
{{
  "motivation": "Brief explanation (max 2 sentences)",
  "grade": "A" or "B"
}}
```"""

UMBRELA_VERSION = "umbrela-zeroshot-bing-v1"
# the blanks that end three of its lines are the authors'
UMBRELA_TEMPLATE = """Given a query and a passage, you must provide a score on an integer scale of 0 to 3 with the following meanings:
0 = represent that the passage has nothing to do with the query, 
1 = represents that the passage seems related to the query but does not answer it, 
2 = represents that the passage has some answer for the query, but the answer may be a bit unclear, or hidden amongst extraneous information and 
3 = represents that the passage is dedicated to the query and contains the exact answer.

Important Instruction: Assign category 1 if the passage is somewhat related to the topic but not completely, category 2 if passage presents something very important related to the entire topic but also has some extra information and category 3 if the passage only and entirely refers to the topic. If none of the above satisfies give it category 0.

Query: {query}
Passage: {passage}

Split this problem into steps:
Consider the underlying intent of the search.
Measure how well the content matches a likely intent of the query (M).
Measure how trustworthy the passage is (T).
Consider the aspects above and the relative importance of each, and decide on a final score (O). Final score must be an integer value only.
Do not provide any code in result. Provide each score in the format of: ##final score: score without providing any reasoning."""  # noqa: W291

GRADE_VERSION = "udcg-fig6-v1"
GRADE_TEMPLATE = """Your job is to grade a predicted answer as CORRECT, INCORRECT, or ABSTAINED against a list of acceptable answers.

## Grading Rules

A predicted answer is CORRECT if:
- It contains the essential information from at least one acceptable answer
- It contains no contradictory information
- When the acceptable answer is a list, at least one item from that list is present

A predicted answer is INCORRECT if:
- It contradicts any acceptable answer
- It contains factually wrong information (even with hedging like "I think" or "possibly")

A predicted answer is ABSTAINED if:
- It explicitly refuses to answer or states uncertainty without providing substantive information
- It contains phrases like "I don't know", "I'm not sure", "I cannot answer", "NO-RESPONSE", "I'm uncertain"

## Examples

**CORRECT answers:**
...
Question: What are Barack Obama's children's names?
Acceptable: ['Malia Obama and Sasha Obama', 'Natasha Marian and Malia Ann']
"Malia and Sasha" (essential info present)
"I believe it's Malia and Sasha Obama" (hedging with correct info)
...

**INCORRECT answers:**
...
Question: What are Barack Obama's children's names?
Acceptable: ['Malia Obama and Sasha Obama']
"Only Malia" (incomplete when both required)
"Malia, Sasha, and Susan" (contains wrong info)
"He has no children" (contradicts acceptable answer)
...

**ABSTAINED answers:**
...
Question: What are Barack Obama's children's names?
"I don't know the names of his children"
"I'm not sure about this information"
"I cannot provide that information"
"I'm uncertain and don't want to guess"
"NO-RESPONSE"
...

## Important Notes
- Ignore capitalization, punctuation, grammar, and order.
- Don't penalize omitted information that's clearly inferred from the question.
- Don't penalize minor typos in names.
- Grade using only the question and acceptable answers provided, even if you know the answer is factually wrong.

---

Here is a new example. Don't apologize or correct yourself if there was a mistake; we are just trying to grade the answer.
...
Question: {question}
Acceptable answers list: {target}
Predicted answer: {predicted_answer}
...

Grade the predicted answer of this new question as one of:
A: CORRECT
B: INCORRECT
C: ABSTAINED

Return a JSON object with the following format:
{{
  "motivation": "Your concise motivation for the grade here. Use maximum 2 sentences.",
  "grade": "A", "B", or "C"
}}"""

CLAIMS_VERSION = "slotwise-claims-v1"
CLAIMS_TEMPLATE = """Split the reference answer to a question into atomic claims: short statements of fact that together say everything the answer says.

Rules:

1. One fact per claim: split a sentence that states several facts.
2. Each claim must be understandable on its own: replace pronouns by what they refer to, and complete a short answer with the question (question "When was the Eiffel Tower completed?", answer "1889": the claim is "The Eiffel Tower was completed in 1889.").
3. Keep only what the answer states: add nothing from your own knowledge, and leave out opinions and filler.
4. Do not repeat a claim.

Example:

Question: What does the Basic plan include?
Reference answer: The Basic plan includes 5 GB of storage and email support. It costs $4 a month.
{{"claims": ["The Basic plan includes 5 GB of storage.", "The Basic plan includes email support.", "The Basic plan costs $4 a month."]}}

Here is a new example:

Question: {question}
Reference answer: {reference}

Return a JSON object with the following format, and nothing else:

{{"claims": ["first claim", "second claim", ...]}}"""

SUPPORT_VERSION = "slotwise-support-v1"
SUPPORT_TEMPLATE = """Determine if a passage SUPPORTS a claim or does NOT SUPPORT it. The passage SUPPORTS the claim if the claim follows from the passage alone: the passage states it, or states something that clearly implies it.

The passage does NOT SUPPORT the claim if:

- it shares keywords or the topic with the claim but does not state it;
- it states only part of the claim, or something that would need outside knowledge to become the claim;
- it contradicts the claim.

The question is given only as context for the claim.

```
Question: {question}
Claim: {claim}
Passage: {passage}
```

Evaluate the passage as one of:

A: SUPPORTED
B: NOT SUPPORTED

Return a JSON object with the following format:

```
{{
  "motivation": "Brief explanation (max 2 sentences)",
  "grade": "A" or "B"
}}
```"""


QUESTION_VERSION = "slotwise-question-v1"
QUESTION_TEMPLATE = """Write one question that a user of a search engine could ask and that the passage below answers.

Rules:

1. The passage alone must answer the question: ask about what the passage is mainly about, not about a detail mentioned in passing.
2. Ask as a user who has not seen the passage would: do not mention "the passage", "the text" or "this document", and do not copy long phrases from it.
3. One question, on one line, ending with a question mark.

Passage: {passage}

Return a JSON object with the following format, and nothing else:

{{"question": "your question?"}}"""


def utility_user_message(question: str, passage: str) -> str:
    """The user turn of the utility prompt, as the reference implementation builds it."""
    return f"Document: {passage}\nQuestion: {question}\nAnswer:"


def utility_messages(question: str, passage: str) -> list[dict[str, str]]:
    """System (Figure 4) and user messages for one (question, passage)."""
    return [
        {"role": "system", "content": UTILITY_SYSTEM},
        {"role": "user", "content": utility_user_message(question, passage)},
    ]


def relevance_prompt(question: str, answers: Sequence[str], document: str) -> str:
    """Figure 5 filled in; answers are shown as a Python list, as in the paper's examples."""
    return RELEVANCE_TEMPLATE.format(question=question, answers=list(answers), document=document)


def umbrela_prompt(query: str, passage: str) -> str:
    """UMBRELA's prompt filled in (no reference answers: the query and the passage alone)."""
    return UMBRELA_TEMPLATE.format(query=query, passage=passage)


def question_prompt(passage: str) -> str:
    """The question-writing prompt filled in."""
    return QUESTION_TEMPLATE.format(passage=passage)


def grade_prompt(question: str, answers: Sequence[str], predicted_answer: str) -> str:
    """Figure 6 filled in."""
    return GRADE_TEMPLATE.format(
        question=question, target=list(answers), predicted_answer=predicted_answer
    )


def claims_prompt(question: str, reference: str) -> str:
    """The claim-splitting prompt filled in."""
    return CLAIMS_TEMPLATE.format(question=question, reference=reference)


def support_prompt(question: str, claim: str, passage: str) -> str:
    """The support judge's prompt filled in."""
    return SUPPORT_TEMPLATE.format(question=question, claim=claim, passage=passage)
