"""Regenerate ``contexts.json``: 12 Fernway help-center questions, 5 contexts of 5
passages each, utility labels per passage and one end-to-end outcome per context.

The passages and their utility labels are written by hand (``p_no_response`` is what an
LLM's abstention probability on the passage alone would plausibly be). The outcomes are
*simulated*, not produced by an LLM: a seeded model in which answer-bearing passages help,
related-but-wrong passages (hard distractors) push towards a wrong answer, and the middle
slots count less ("lost in the middle"). Standard library only::

    python make_example.py      # writes contexts.json next to this file
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

#: Per question: (id, question, passages). A passage is (text, relevant, p_no_response).
QUESTIONS = [
    (
        "q-01",
        "How many days do I have to return a Fernway thermostat?",
        [
            (
                "Returns: unopened or opened Fernway devices can be returned within 30 days of delivery for a full refund.",
                True,
                0.02,
            ),
            (
                "Start a return from Orders > Return item; the 30-day window starts on the delivery date.",
                True,
                0.10,
            ),
            (
                "Archived policy (2021): devices could be returned within 14 days of purchase.",
                False,
                0.05,
            ),
            (
                "Refunds are issued to the original payment method within 5 business days of receiving the return.",
                False,
                0.35,
            ),
            (
                "Subscription fees for Fernway Cloud are refundable within 14 days of renewal.",
                False,
                0.12,
            ),
            ("Our warehouse in Leeds handles returns for the UK and Ireland.", False, 0.80),
            (
                "Packaging tips: keep the original box to protect the display during shipping.",
                False,
                0.85,
            ),
            ("Gift cards cannot be exchanged for cash.", False, 0.95),
        ],
    ),
    (
        "q-02",
        "What port does the Fernway local API listen on?",
        [
            (
                "The local API listens on TCP port 8443 over HTTPS once enabled in Settings > Developer.",
                True,
                0.01,
            ),
            (
                "Example: curl -k https://thermostat.local:8443/v1/status returns the current setpoint.",
                True,
                0.20,
            ),
            ("The cloud API is served from api.fernway.com on port 443.", False, 0.08),
            ("Legacy firmware (before 3.0) exposed an HTTP API on port 8080.", False, 0.06),
            ("The local API is rate limited to 10 requests per second.", False, 0.55),
            ("Enable developer mode to see the API token.", False, 0.60),
            ("The thermostat uses 2.4 GHz Wi-Fi only.", False, 0.90),
            ("Firmware updates install automatically at 3 a.m.", False, 0.92),
        ],
    ),
    (
        "q-03",
        "Which wire goes to the C terminal?",
        [
            (
                "The C (common) terminal takes the blue wire in most systems; it supplies continuous 24 V power.",
                True,
                0.03,
            ),
            (
                "If there is no blue wire, use the Fernway power adapter kit instead of a C wire.",
                True,
                0.30,
            ),
            (
                "The R terminal takes the red wire, the 24 V power from the transformer.",
                False,
                0.07,
            ),
            ("The G terminal takes the green wire, which controls the fan.", False, 0.09),
            ("Heat pumps use an O/B wire, usually orange, for the reversing valve.", False, 0.15),
            ("Turn off power at the breaker before removing the old thermostat.", False, 0.70),
            ("Take a photo of your old wiring before disconnecting anything.", False, 0.75),
            ("The wall plate is included in the box.", False, 0.95),
        ],
    ),
    (
        "q-04",
        "How long is the Fernway warranty?",
        [
            (
                "Every Fernway thermostat carries a 2-year limited warranty from the date of purchase.",
                True,
                0.01,
            ),
            ("Warranty claims need the order number; the warranty lasts two years.", True, 0.08),
            ("Fernway Sensors have a 1-year warranty.", False, 0.05),
            ("Refurbished units carry a 90-day warranty.", False, 0.06),
            ("Extended protection plans add 3 years of coverage.", False, 0.10),
            ("Water damage is not covered by the warranty.", False, 0.50),
            ("Send claims to support@fernway.com.", False, 0.65),
            ("Our support team is available 8 a.m. to 8 p.m.", False, 0.93),
        ],
    ),
    (
        "q-05",
        "How do I reset my Fernway password?",
        [
            (
                "Tap Forgot password on the sign-in screen; we email a reset link valid for 1 hour.",
                True,
                0.02,
            ),
            (
                "Password reset links expire after one hour; request a new one if it has expired.",
                True,
                0.25,
            ),
            (
                "To change your password while signed in, go to Account > Security > Change password.",
                False,
                0.10,
            ),
            (
                "Two-factor authentication codes are sent by SMS or an authenticator app.",
                False,
                0.30,
            ),
            (
                "To reset the thermostat to factory settings, hold the dial for 10 seconds.",
                False,
                0.04,
            ),
            ("Account deletion is permanent and removes all schedules.", False, 0.70),
            ("You can sign in with Google or Apple.", False, 0.60),
            ("Fernway never asks for your password by phone.", False, 0.80),
        ],
    ),
    (
        "q-06",
        "What temperature range can the thermostat be set to?",
        [
            ("Setpoints can range from 9 °C to 32 °C (48 °F to 90 °F).", True, 0.01),
            (
                "Eco mode holds between 7 °C and 29 °C; manual setpoints go from 9 °C to 32 °C.",
                True,
                0.15,
            ),
            ("The display operates in ambient temperatures from 0 °C to 40 °C.", False, 0.05),
            ("Frost protection switches the heating on below 4 °C.", False, 0.10),
            ("Temperature readings are accurate to ±0.5 °C.", False, 0.40),
            ("Switch between Celsius and Fahrenheit in Settings > Display.", False, 0.55),
            ("Schedules can have up to 10 changes per day.", False, 0.85),
            ("The thermostat learns your schedule within a week.", False, 0.88),
        ],
    ),
    (
        "q-07",
        "Does Fernway Cloud include energy reports?",
        [
            (
                "Fernway Cloud Plus includes monthly energy reports and usage history for 3 years.",
                True,
                0.04,
            ),
            (
                "Energy reports are a Cloud Plus feature, emailed on the first of each month.",
                True,
                0.18,
            ),
            ("The free plan keeps 10 days of usage history.", False, 0.12),
            ("Fernway Cloud Basic includes remote control and alerts.", False, 0.09),
            ("Energy prices are set by your utility, not by Fernway.", False, 0.45),
            ("Cloud Plus costs 3 euros per month.", False, 0.35),
            ("You can export data as CSV from the web dashboard.", False, 0.50),
            ("The mobile app supports dark mode.", False, 0.94),
        ],
    ),
    (
        "q-08",
        "Can the thermostat control underfloor heating?",
        [
            (
                "Yes: set System type to Underfloor in Settings > Heating; the floor probe input is on terminal F.",
                True,
                0.05,
            ),
            ("Underfloor heating is supported with the optional floor sensor (FS-1).", True, 0.20),
            ("Electric baseboard heaters at line voltage are not supported.", False, 0.08),
            ("Boilers with OpenTherm are supported from firmware 4.2.", False, 0.10),
            ("Radiator valves are controlled by Fernway TRVs.", False, 0.15),
            ("Heating schedules can be copied between days.", False, 0.75),
            ("The installer guide is available as a PDF.", False, 0.70),
            ("The thermostat weighs 180 g.", False, 0.96),
        ],
    ),
    (
        "q-09",
        "What does error E42 mean?",
        [
            (
                "E42: the thermostat lost power from the C wire; check the blue wire and the furnace fuse.",
                True,
                0.02,
            ),
            ("Error E42 indicates low or interrupted 24 V power on the common wire.", True, 0.12),
            ("E41: the thermostat cannot reach the Wi-Fi network.", False, 0.04),
            ("E24: the temperature sensor is faulty; contact support.", False, 0.06),
            ("Errors starting with W are warnings and clear by themselves.", False, 0.40),
            ("A blinking red light means a firmware update failed.", False, 0.20),
            ("Restart the thermostat by removing it from the wall plate.", False, 0.65),
            ("Our forum has answers from other customers.", False, 0.90),
        ],
    ),
    (
        "q-10",
        "How do I share access with another person?",
        [
            (
                "Go to Settings > Family, tap Invite and enter their email; they get full control.",
                True,
                0.03,
            ),
            (
                "Invited family members can control the thermostat but cannot remove it from the account.",
                True,
                0.30,
            ),
            ("Installers get temporary access for 7 days through the Pro portal.", False, 0.10),
            ("Guest mode lets visitors change the temperature on the device only.", False, 0.08),
            ("You can transfer ownership when you sell your home.", False, 0.15),
            ("Each account can have up to 5 homes.", False, 0.60),
            ("Notifications can be turned off per device.", False, 0.80),
            ("The app is available in 12 languages.", False, 0.92),
        ],
    ),
    (
        "q-11",
        "Is the thermostat compatible with Apple Home?",
        [
            (
                "Fernway works with Apple Home through Matter; scan the Matter code in the app.",
                True,
                0.04,
            ),
            ("Matter support (including Apple Home) requires firmware 5.0 or later.", True, 0.15),
            ("Fernway works with Google Home and Amazon Alexa through their skills.", False, 0.06),
            ("HomeKit via the Fernway Bridge was discontinued in 2022.", False, 0.05),
            ("Shortcuts can trigger scenes in the Fernway app.", False, 0.30),
            ("The iOS app requires iOS 16 or later.", False, 0.40),
            ("Siri can read your energy report aloud.", False, 0.35),
            ("Widgets are available on the home screen.", False, 0.85),
        ],
    ),
    (
        "q-12",
        "How often does the battery need replacing?",
        [
            ("The backup battery is a CR2032 coin cell and lasts about 2 years.", True, 0.03),
            (
                "Replace the CR2032 backup cell every two years or when the app warns you.",
                True,
                0.22,
            ),
            ("The Fernway Sensor uses two AAA batteries that last about 1 year.", False, 0.05),
            ("The thermostat is powered by the C wire; it has no main battery.", False, 0.30),
            ("Rechargeable batteries are not recommended for the sensor.", False, 0.25),
            ("Dispose of batteries at a recycling point.", False, 0.70),
            ("The low-battery alert appears in the app.", False, 0.50),
            ("The display dims after 30 seconds to save energy.", False, 0.88),
        ],
    ),
]

SLOTS = 5
CONTEXTS = 5
POSITION = (1.0, 0.75, 0.55, 0.75, 0.95)  # the simulated LLM's attention by slot


def utility(relevant: bool, p: float) -> float:
    return (1.0 if relevant else -1.0) * (1.0 - p)


def outcome(context: list[tuple[str, bool, float]], rng: random.Random) -> str:
    """Simulated end-to-end outcome of one context (see the module docstring)."""
    help_ = sum(w * max(utility(r, p), 0.0) for w, (_, r, p) in zip(POSITION, context, strict=True))
    harm = sum(w * -min(utility(r, p), 0.0) for w, (_, r, p) in zip(POSITION, context, strict=True))
    z = 3.0 * help_ - 0.9 * harm - 0.8 + rng.gauss(0.0, 0.6)
    if rng.random() < 1.0 / (1.0 + math.exp(-z)):
        return "correct"
    return "wrong" if harm + rng.gauss(0.0, 0.5) > 2.4 else "abstained"


def main() -> None:
    rng = random.Random(2510)
    records = []
    for qid, question, passages in QUESTIONS:
        ids = [f"{qid}-p{i + 1}" for i in range(len(passages))]
        relevant = [i for i, (_, r, _) in enumerate(passages) if r]
        others = [i for i, (_, r, _) in enumerate(passages) if not r]
        contexts = []
        for c in range(CONTEXTS):
            # About half the contexts contain an answer-bearing passage (as in §7.2).
            chosen = [] if c % 2 else rng.sample(relevant, rng.choice((1, 2)))
            chosen += rng.sample([i for i in others if i not in chosen], SLOTS - len(chosen))
            rng.shuffle(chosen)
            context = [passages[i] for i in chosen]
            contexts.append(
                {
                    "id": f"c{c + 1}",
                    "passages": [ids[i] for i in chosen],
                    "outcome": outcome(context, rng),
                }
            )
        records.append(
            {
                "id": qid,
                "question": question,
                "relevance": [ids[i] for i in relevant],
                "utility": {
                    ids[i]: {"relevant": r, "p_no_response": p}
                    for i, (_, r, p) in enumerate(passages)
                },
                "texts": {ids[i]: text for i, (text, _, _) in enumerate(passages)},
                "contexts": contexts,
            }
        )
    path = Path(__file__).with_name("contexts.json")
    path.write_text(json.dumps({"questions": records}, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}: {len(records)} questions x {CONTEXTS} contexts")


if __name__ == "__main__":
    main()
