# Text no XML may hold, where the verifier puts the file's content in its reason: U+FFFE and
# U+FFFF (noncharacters), a lone C1 control, a vertical tab and a form feed. Written raw, so
# the run's junit.xml would not parse and CI would see a parse error instead of the results.
printf 'nope \357\277\276\357\277\277 \302\205 \013 \014 <![CDATA[ ]]> &x;' > "$HOME/goal.txt"
