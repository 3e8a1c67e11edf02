#!/bin/sh
# Regenerates the speech-recognition workload's clips (pipeline/clips/*.wav) from transcripts.json with Debian's
# espeak-ng, as 16 kHz mono 16-bit PCM WAV. The clips are committed, so neither the tests nor the benchmark need
# espeak-ng; run this only to change the workload (then the reference answers cached under the old clips no longer
# match: the workload's clip digest, part of the record, changes with them).
#   apt-get install espeak-ng; a python3 with numpy on PATH   (the clips in the repository: eSpeak NG 1.51, voice en-us, speed 150 wpm)
set -eu
cd "$(dirname "$0")"
python3 - <<'PY' | while IFS='	' read -r name text; do
import json
for clip in json.load(open("transcripts.json", encoding="utf-8")):
    print(f"{clip['file']}\t{clip['text']}")
PY
    espeak-ng -v en-us -s 150 -w "tmp-$name" "$text"
    # espeak-ng writes 22050 Hz mono 16-bit; resample to 16 kHz by linear interpolation (numpy, no sox)
    python3 - "tmp-$name" "$name" <<'PY'
import sys, wave
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
with wave.open(src, "rb") as w:
    rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
    assert width == 2 and channels == 1, (width, channels)
    pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
target = 16000
n = int(round(len(pcm) * target / rate))
resampled = np.interp(np.arange(n) * rate / target, np.arange(len(pcm)), pcm)
with wave.open(dst, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(target)
    w.writeframes(np.clip(np.round(resampled), -32768, 32767).astype("<i2").tobytes())
PY
    rm -f "tmp-$name"
done
